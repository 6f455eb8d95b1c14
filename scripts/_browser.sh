# shellcheck shell=bash
# Sourced by the test script: makes sure Debian's headless Chromium and its ChromeDriver are
# installed (the inspector's browser tests drive them through selenium), installing them with
# apt-get when running as root. Exports CTX_CHROMIUM and CTX_CHROMEDRIVER.

browser_install() {
  if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
      echo "error: chromium and chromedriver not found; install them (apt-get install -y chromium chromium-driver) or run as root" >&2
      return 1
    fi
    echo "==> installing Chromium (apt-get install -y chromium chromium-driver)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  fi
  CTX_CHROMIUM="$(command -v chromium)"
  CTX_CHROMEDRIVER="$(command -v chromedriver)"
  export CTX_CHROMIUM CTX_CHROMEDRIVER
}
