# shellcheck shell=bash
# shellcheck disable=SC2154 # clients is nemesis.sh's
# nemesis.sh's --screenshot (sourced, not run): the run's page in headless Chromium.

# Renders the run's page in headless Chromium: a screenshot to $2, and the DOM as Chromium
# parsed it must hold $3 lanes (one per client and lock: LOCKS in examples/nemesis/main.rs
# has 4). Chromium runs as root here, hence --no-sandbox, on a page that loads nothing.
check_page() {
    local page="$1" png="$2" want="$3" dom lanes height
    # The page's height: a header, one timeline per lock, four charts.
    height=$((150 + 4 * (60 + 16 * clients) + 4 * 172))
    dom="$(timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --dump-dom "file://$(realpath "$page")" 2>/dev/null)" || {
        say "ERROR: chromium could not load $page"
        return 1
    }
    lanes="$(grep -o '<g class="lane"' <<<"$dom" | wc -l)"
    timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --window-size="1440,$height" --screenshot="$(realpath -m "$png")" \
        "file://$(realpath "$page")" >/dev/null 2>&1 || {
        say "ERROR: chromium could not take a screenshot of $page"
        return 1
    }
    [[ -s "$png" ]] || { say "ERROR: no screenshot at $png"; return 1; }
    # A long run's page is dense: a palette PNG is a third of the size (Debian's pngquant).
    if command -v pngquant >/dev/null 2>&1; then
        pngquant --quality=70-95 --speed 1 --force --output "$png" "$png" || true
    fi
    if ((lanes != want)); then
        say "ERROR: the page rendered $lanes lanes, expected $want"
        return 1
    fi
    say "page checked in Chromium: $lanes lanes as expected; screenshot $png ($(stat -c %s "$png") bytes)"
}
