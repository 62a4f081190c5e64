// Within-segment pair player: plays the first clip, then the second, reporting playback
// heartbeats for each through juries/static/juries/heartbeat.js (the same report as the
// screening player); the server alone decides what counts as watched (juries/playback.py).
// The choice buttons open once the server has verified both clips.
(function () {
  "use strict";

  var playback = window.DuelPlayback;

  function setupClip(box, onComplete) {
    var video = box.querySelector("video");
    var button = box.querySelector("button.play");
    var progress = box.querySelector(".progress");
    playback.report({
      video: video,
      beatUrl: box.dataset.beatUrl,
      progress: progress,
      nextSeq: parseInt(box.dataset.nextSeq || "0", 10),
      intervalMs: 500,
      sendPlayed: false,
      complete: box.dataset.complete === "1",
      completeText: "Clip complete.",
      missedText: "Not all of the clip was verified as played: play it again.",
      onComplete: function () {
        box.dataset.complete = "1";
        onComplete();
      },
    });
    button.addEventListener("click", function () {
      playback.play(video, box.dataset.mediaUrl, button, progress, "Press play on the clip.");
    });
    return button;
  }

  function init() {
    var pair = document.getElementById("pair");
    if (!pair) return;
    var second = document.getElementById("clip-1");
    var choices = document.querySelectorAll("#segment-choice button");
    var secondButton = setupClip(second, function () {
      choices.forEach(function (b) { b.disabled = false; });
    });
    setupClip(document.getElementById("clip-0"), function () {
      secondButton.disabled = false;
    });
  }

  document.addEventListener("DOMContentLoaded", init);
})();
