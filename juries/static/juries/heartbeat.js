// Playback heartbeats for the jury players (screening sessions and segment pairs): a report
// of position, rate, paused and muted every interval while playing and on every playback
// event, one in flight at a time, in sequence order. The server alone decides what counts as
// watched, against its own clock (juries/playback.py); this script only reports and shows
// the server's verdict.
(function () {
  "use strict";

  function csrfToken() {
    var match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  // POST JSON with the CSRF token; resolves to the answer's JSON with its HTTP status.
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

  // options: video, beatUrl, progress (element), nextSeq, intervalMs, sendPlayed,
  // complete (already complete), completeText, missedText, onComplete.
  function report(options) {
    var video = options.video;
    var progress = options.progress;
    var seq = options.nextSeq || 0;
    var timer = null;
    var finished = !!options.complete;
    var queue = Promise.resolve();

    function send() {
      if (finished) return Promise.resolve();
      var body = {
        seq: seq++,
        position: video.currentTime,
        rate: video.playbackRate,
        paused: video.paused,
        muted: video.muted || video.volume === 0,
      };
      if (options.sendPlayed) body.played = playedRanges(video);
      return post(options.beatUrl, body).then(function (data) {
        if (!data.ok) {
          progress.textContent = (data.errors || ["Playback report refused."]).join(" ");
          return;
        }
        progress.textContent = "Verified playback: " + Math.floor(data.coverage * 100) + "%" +
          (data.reached_ending ? ", ending reached" : "");
        if (data.complete && !finished) {
          finished = true;
          window.clearInterval(timer);
          progress.textContent = options.completeText;
          options.onComplete();
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
      }, options.intervalMs);
    });
    video.addEventListener("ended", function () {
      beat().then(function () {
        if (!finished) progress.textContent += ". " + options.missedText;
      });
    });
  }

  // Show the video, load its opaque address once and start it; hide the start button.
  function play(video, mediaUrl, button, progress, hint) {
    video.hidden = false;
    if (!video.src) video.src = mediaUrl;
    var attempt = video.play();
    if (attempt && attempt.catch) {
      attempt.catch(function () { progress.textContent = hint; });
    }
    button.hidden = true;
  }

  window.DuelPlayback = { post: post, report: report, play: play };
})();
