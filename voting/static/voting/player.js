/* The blind pairwise player: Film 1 then Film 2, the playback proof, the vote.
 *
 * What the page reports, in heartbeats signed with this assignment's key (HMAC-SHA256 over the
 * exact request body): the media ranges played since the last acknowledged heartbeat (from
 * timeupdate; a jump forward is a seek and starts a new range, so a skipped stretch never
 * counts), whether sound was on for each range, the playback rate, "ended" and the tab's
 * visibility. The server judges them on its own clock (voting/playback.py) and says when both
 * films are done; only then do the vote buttons unlock. A film pauses when its tab goes to the
 * background. Speed changes are undone and reported.
 */
(function () {
  "use strict";

  var config = JSON.parse(document.getElementById("duel-config").textContent);
  var statusLine = document.getElementById("vote-status");
  var choices = document.getElementById("ballot-choices");
  var ballotForm = document.getElementById("ballot-form");
  var ballotHelp = document.getElementById("ballot-help");
  var encoder = new TextEncoder();
  var key = DuelHmac.fromHex(config.key);
  var seq = config.seq || 0;
  var queue = Promise.resolve();
  var HEARTBEAT_MS = 1000;

  var MESSAGES = {
    playback_rate: "Films must play at normal speed: that part did not count.",
    background_playback: "The film kept playing while the page was hidden: that part did not count.",
    too_fast: "Some playback could not be confirmed. Please keep watching.",
    impossible_speed: "More film was reported than time has passed. That part did not count.",
    already_voted: "Your vote for this pair is already locked.",
    replayed: "A heartbeat was sent twice and ignored.",
    bad_signature: "This page could not prove what you watched. Please reload it.",
    not_watched: "Please watch both films to the end before voting.",
    rate_limited: "Too many requests. Please wait a moment."
  };

  function say(text) { statusLine.textContent = text; }

  function round3(x) { return Math.round(x * 1000) / 1000; }

  function post(url, payload) {
    var body = JSON.stringify(payload);
    var signature = DuelHmac.toHex(DuelHmac.hmacSha256(key, encoder.encode(body)));
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        "X-CSRFToken": config.csrf,
        "X-Duel-Signature": signature
      },
      body: body
    });
  }

  var films = [1, 2].map(function (n) {
    var section = document.getElementById("film-" + n);
    var film = {
      n: n,
      section: section,
      video: document.getElementById("video-" + n),
      playButton: section.querySelector("[data-action=play]"),
      muteButton: section.querySelector("[data-action=mute]"),
      volume: section.querySelector("[data-action=volume]"),
      bar: section.querySelector("progress.watched"),
      text: section.querySelector(".progress-text"),
      pending: [],
      lastT: null,
      lastWall: 0,
      rateSeen: 1,
      ended: false,
      timer: null
    };
    film.video.controls = false;
    film.video.playbackRate = 1;
    return film;
  });

  function audible(film) {
    return !film.video.muted && film.video.volume >= config.minVolume;
  }

  // Extend the pending ranges with what played since the last timeupdate.
  function track(film) {
    var now = performance.now();
    var t = film.video.currentTime;
    if (film.lastT !== null && !film.video.seeking) {
      var advanced = t - film.lastT;
      var wall = (now - film.lastWall) / 1000;
      if (advanced > 0 && advanced <= wall * 1.5 + 0.5) {
        var sound = audible(film);
        var last = film.pending[film.pending.length - 1];
        if (last && Math.abs(last[1] - film.lastT) < 1e-6 && last[2] === sound) {
          last[1] = t;
        } else {
          film.pending.push([film.lastT, t, sound]);
        }
      }
    }
    film.lastT = t;
    film.lastWall = now;
  }

  function heartbeat(film) {
    queue = queue.then(function () { return sendHeartbeat(film); }).catch(function () {});
    return queue;
  }

  function sendHeartbeat(film) {
    var ranges = film.pending.splice(0, film.pending.length);
    seq += 1;
    var payload = {
      token: config.token,
      film: film.n,
      seq: seq,
      t: Date.now(),
      ranges: ranges.map(function (r) { return [round3(r[0]), round3(r[1]), r[2] ? 1 : 0]; }),
      muted: film.video.muted,
      volume: round3(film.video.volume),
      rate: film.rateSeen,
      paused: film.video.paused,
      ended: film.ended,
      visible: document.visibilityState === "visible"
    };
    film.rateSeen = 1;
    return post(config.heartbeat, payload).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (data) {
        if (data.films) showStatus(data);
        if (!response.ok) say(MESSAGES[data.error] || data.detail || "The server refused this update.");
      });
    }, function () {
      // Not delivered: keep the ranges for the next heartbeat.
      film.pending = ranges.concat(film.pending);
      say("Connection problem: we will keep trying.");
    });
  }

  function percent(x) { return Math.floor(x * 100); }

  function showStatus(status) {
    films.forEach(function (film) {
      var s = status.films && status.films[String(film.n)];
      if (!s) return;
      film.bar.value = percent(s.coverage);
      var parts = ["Film " + film.n + ": " + percent(s.coverage) + "% watched"];
      parts.push(s.heard ? "sound on" : "sound was off for part of it");
      parts.push(s.complete ? "done" : (s.ending ? "ending played" : "ending not played yet"));
      film.text.textContent = parts.join(" · ") + ".";
      film.section.classList.toggle("done", !!s.complete);
    });
    var first = status.films && status.films["1"];
    if (first && first.complete) films[1].playButton.disabled = false;
    choices.disabled = !status.ready_to_vote;
    if (status.ready_to_vote) {
      ballotHelp.textContent = status.audio_on
        ? "Both films are done. Choose the better film."
        : "Both films are done. The sound was off for part of a film: your vote will be recorded but not counted in the main result.";
      say("Both films are done: you can vote now.");
    }
  }

  function showSound(film) {
    var muted = film.video.muted;
    film.muteButton.setAttribute("aria-pressed", muted ? "true" : "false");
    film.muteButton.textContent = muted ? "Sound off (muted)" : "Sound on";
    film.volume.value = String(film.video.volume);
  }

  function stopTimer(film) {
    if (film.timer) { clearInterval(film.timer); film.timer = null; }
  }

  films.forEach(function (film) {
    var video = film.video;
    film.playButton.addEventListener("click", function () {
      if (video.paused) {
        films.forEach(function (other) { if (other !== film && !other.video.paused) other.video.pause(); });
        video.playbackRate = 1;
        var started = video.play();
        if (started && started.catch) started.catch(function () { say("Press Play again to start the film."); });
      } else {
        video.pause();
      }
    });
    film.muteButton.addEventListener("click", function () {
      video.muted = !video.muted;
      showSound(film);
    });
    film.volume.addEventListener("input", function () {
      video.volume = parseFloat(film.volume.value);
      if (video.volume > 0 && video.muted) video.muted = false;
    });
    video.addEventListener("playing", function () {
      film.lastT = video.currentTime;
      film.lastWall = performance.now();
      film.playButton.textContent = "Pause Film " + film.n;
      say("Film " + film.n + " is playing.");
      heartbeat(film);
      stopTimer(film);
      film.timer = setInterval(function () { track(film); heartbeat(film); }, HEARTBEAT_MS);
    });
    video.addEventListener("timeupdate", function () { track(film); });
    video.addEventListener("seeking", function () { film.lastT = null; });
    video.addEventListener("seeked", function () {
      film.lastT = video.currentTime;
      film.lastWall = performance.now();
    });
    video.addEventListener("pause", function () {
      track(film);
      stopTimer(film);
      film.playButton.textContent = (video.ended ? "Watch again: Film " : "Play Film ") + film.n;
      heartbeat(film);
    });
    video.addEventListener("ended", function () {
      track(film);
      film.ended = true;
      stopTimer(film);
      film.playButton.textContent = "Watch again: Film " + film.n;
      heartbeat(film).then(function () {
        if (film.n === 1) {
          films[1].playButton.disabled = false;
          say("Film 1 has finished. Press “Play Film 2” when you are ready.");
          films[1].playButton.focus();
        }
      });
    });
    video.addEventListener("volumechange", function () {
      track(film);  // what played so far keeps the sound state it had
      showSound(film);
      if (!video.paused) heartbeat(film);
    });
    video.addEventListener("ratechange", function () {
      if (video.playbackRate !== 1) {
        film.rateSeen = video.playbackRate;
        video.playbackRate = 1;
      }
    });
  });

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden") {
      films.forEach(function (film) {
        if (!film.video.paused) {
          film.video.pause();
          say("Paused because you left the page. Press Play to carry on.");
        }
      });
    }
  });

  ballotForm.addEventListener("submit", function (event) {
    event.preventDefault();
    var button = event.submitter;
    if (!button || choices.disabled) return;
    choices.disabled = true;
    queue.then(function () {
      return post(config.ballot, { token: config.token, choice: button.value });
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (data) {
        if (response.status === 201) {
          window.location.assign(data.redirect);
          return;
        }
        if (data.status) showStatus(data.status);
        say(MESSAGES[data.error] || data.detail || "Your vote could not be recorded.");
        choices.disabled = data.error === "already_voted" || !(data.status || {}).ready_to_vote;
      });
    }, function () {
      say("Connection problem: your vote was not sent. Please try again.");
      choices.disabled = false;
    });
  });

  showStatus(config.status);
})();
