// Screening session player: starts the assigned film through the server, then reports
// playback heartbeats (position, rate, paused, muted, played ranges) every second and on
// every playback event through juries/static/juries/heartbeat.js. The server alone decides
// what counts as watched, against its own clock (juries/playback.py); this script only
// reports.
(function () {
  "use strict";

  var playback = window.DuelPlayback;

  function init() {
    var player = document.getElementById("player");
    if (!player) return;
    var video = document.getElementById("film");
    var button = document.getElementById("start");
    var progress = document.getElementById("progress");
    var countdown = document.getElementById("countdown");

    function play() {
      playback.play(
        video, player.dataset.mediaUrl, button, progress, "Press play on the film to start it."
      );
    }

    playback.report({
      video: video,
      beatUrl: player.dataset.beatUrl,
      progress: progress,
      nextSeq: parseInt(player.dataset.nextSeq || "0", 10),
      intervalMs: 1000,
      sendPlayed: true,
      complete: false,
      completeText: "Film complete. Loading the questions…",
      missedText: "Not all of the film was verified as played: " +
        "go back and play the parts you missed.",
      onComplete: function () {
        window.setTimeout(function () { window.location.reload(); }, 300);
      },
    });

    button.addEventListener("click", function () {
      if (player.dataset.started === "1") {
        play();
        return;
      }
      button.disabled = true;
      playback.post(player.dataset.startUrl).then(function (data) {
        if (!data.ok) {
          progress.textContent = (data.errors || ["The film cannot start yet."]).join(" ");
          button.disabled = false;
          return;
        }
        player.dataset.started = "1";
        play();
      });
    });

    // The fixed break: the server refuses an early start; this only shows the countdown.
    var availableAt = player.dataset.availableAt ? Date.parse(player.dataset.availableAt) : NaN;
    if (player.dataset.started !== "1" && !isNaN(availableAt)) {
      var tick = function () {
        var left = Math.ceil((availableAt - Date.now()) / 1000);
        if (left > 0) {
          button.disabled = true;
          countdown.textContent = "Break: the next film can start in " + left + " s.";
          window.setTimeout(tick, 250);
        } else {
          countdown.textContent = "";
          var blockers = document.getElementById("blockers");
          if (blockers) blockers.hidden = true;
          button.disabled = false;
        }
      };
      tick();
    }
  }

  document.addEventListener("DOMContentLoaded", init);
})();
