// Screening session player: starts the assigned film through the server, then reports
// playback heartbeats (position, rate, paused, muted, played ranges) every second and on
// every playback event. The server alone decides what counts as watched, against its own
// clock (juries/playback.py); this script only reports.
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
      return response.json().then(function (data) {
        data.status = response.status;
        return data;
      });
    });
  }

  function playedRanges(video) {
    var out = [];
    for (var i = 0; i < video.played.length; i++) {
      out.push([video.played.start(i), video.played.end(i)]);
    }
    return out;
  }

  function init() {
    var player = document.getElementById("player");
    if (!player) return;
    var video = document.getElementById("film");
    var button = document.getElementById("start");
    var progress = document.getElementById("progress");
    var countdown = document.getElementById("countdown");
    var seq = parseInt(player.dataset.nextSeq || "0", 10);
    var timer = null;
    var finished = false;
    var queue = Promise.resolve();

    // One heartbeat in flight at a time, in sequence order.
    function beat() {
      queue = queue.then(send, send);
      return queue;
    }

    function send() {
      if (finished) return Promise.resolve();
      var body = {
        seq: seq++,
        position: video.currentTime,
        rate: video.playbackRate,
        paused: video.paused,
        muted: video.muted || video.volume === 0,
        played: playedRanges(video),
      };
      return post(player.dataset.beatUrl, body).then(function (data) {
        if (!data.ok) {
          progress.textContent = (data.errors || ["Playback report refused."]).join(" ");
          return;
        }
        progress.textContent =
          "Verified playback: " + Math.floor(data.coverage * 100) + "%" +
          (data.reached_ending ? ", ending reached" : "");
        if (data.complete && !finished) {
          finished = true;
          window.clearInterval(timer);
          progress.textContent = "Film complete. Loading the questions…";
          window.setTimeout(function () { window.location.reload(); }, 300);
        }
      });
    }

    function play() {
      video.hidden = false;
      if (!video.src) video.src = player.dataset.mediaUrl;
      var attempt = video.play();
      if (attempt && attempt.catch) {
        attempt.catch(function () {
          progress.textContent = "Press play on the film to start it.";
        });
      }
      button.hidden = true;
    }

    ["playing", "pause", "seeked", "ratechange", "volumechange"].forEach(function (name) {
      video.addEventListener(name, function () { beat(); });
    });
    video.addEventListener("playing", function () {
      if (timer === null) timer = window.setInterval(function () {
        if (!video.paused) beat();
      }, 1000);
    });
    video.addEventListener("ended", function () {
      beat().then(function () {
        if (!finished) {
          progress.textContent += ". Not all of the film was verified as played: " +
            "go back and play the parts you missed.";
        }
      });
    });

    button.addEventListener("click", function () {
      if (player.dataset.started === "1") {
        play();
        return;
      }
      button.disabled = true;
      post(player.dataset.startUrl).then(function (data) {
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
