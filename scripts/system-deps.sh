#!/usr/bin/env bash
# Install the system packages Duel needs, through apt-get when we are root; otherwise say how.
# Usage: scripts/system-deps.sh [ffmpeg] [chromium] [venv]
set -euo pipefail

need=()
for what in "$@"; do
  case "$what" in
    ffmpeg)
      command -v ffmpeg >/dev/null && command -v ffprobe >/dev/null || need+=(ffmpeg)
      [ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
      ;;
    chromium)
      [ -x /usr/bin/chromium ] || need+=(chromium)
      ;;
    venv)
      python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
      ;;
    *) echo "system-deps: unknown component $what" >&2; exit 2 ;;
  esac
done

[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "Installing system packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
  echo "Duel needs these system packages: ${need[*]}" >&2
  echo "Install them with:  sudo apt-get install ${need[*]}" >&2
  exit 1
fi
