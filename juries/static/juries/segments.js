// Within-segment pair player: plays the first clip, then the second, reporting playback
// heartbeats for each (the same report as the screening player, juries/static/juries/
// session.js); the server alone decides what counts as watched (juries/playback.py). The
// choice buttons open once the server has verified both clips.
(function () {
  "use strict";

  function csrfToken() {
    var match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  function post(url, body) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify(body || {}),
    }).then(function (response) {
      return response.json();
    });
  }

  function setupClip(box, onComplete) {
    var video = box.querySelector("video");
    var button = box.querySelector("button.play");
    var progress = box.querySelector(".progress");
    var seq = parseInt(box.dataset.nextSeq || "0", 10);
    var timer = null;
    var finished = box.dataset.complete === "1";
    var queue = Promise.resolve();

    function send() {
      if (finished) return Promise.resolve();
      return post(box.dataset.beatUrl, {
        seq: seq++,
        position: video.currentTime,
        rate: video.playbackRate,
        paused: video.paused,
        muted: video.muted || video.volume === 0,
      }).then(function (data) {
        if (!data.ok) {
          progress.textContent = (data.errors || ["Playback report refused."]).join(" ");
          return;
        }
        progress.textContent = "Verified playback: " + Math.floor(data.coverage * 100) + "%" +
          (data.reached_ending ? ", ending reached" : "");
        if (data.complete && !finished) {
          finished = true;
          box.dataset.complete = "1";
          window.clearInterval(timer);
          progress.textContent = "Clip complete.";
          onComplete();
        }
      });
    }

    function beat() {
      queue = queue.then(send, send);
      return queue;
    }

    ["playing", "pause", "seeked", "ratechange", "volumechange"].forEach(function (name) {
      video.addEventListener(name, function () { beat(); });
    });
    video.addEventListener("playing", function () {
      if (timer === null) timer = window.setInterval(function () {
        if (!video.paused) beat();
      }, 500);
    });
    video.addEventListener("ended", function () {
      beat().then(function () {
        if (!finished) {
          progress.textContent += ". Not all of the clip was verified as played: play it again.";
        }
      });
    });
    button.addEventListener("click", function () {
      video.hidden = false;
      if (!video.src) video.src = box.dataset.mediaUrl;
      var attempt = video.play();
      if (attempt && attempt.catch) {
        attempt.catch(function () { progress.textContent = "Press play on the clip."; });
      }
      button.hidden = true;
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
