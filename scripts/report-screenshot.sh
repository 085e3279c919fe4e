#!/usr/bin/env bash
# Renders a run folder's report.md (with its SVG charts) to HTML and takes a
# screenshot of it in headless Chromium, to look at the report as an
# operator would.
#
#   scripts/report-screenshot.sh RUN_DIR OUT.png [HEIGHT]
#
# HEIGHT: the window height in pixels (default 4000; the page is 1200 wide).
# Needs pandoc and chromium (Debian: apt-get install pandoc chromium).
# Writes nothing into RUN_DIR: the HTML, with the charts inlined, goes to a
# temporary folder.
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 RUN_DIR OUT.png [HEIGHT]" >&2
    exit 2
fi
run=$(realpath "$1")
out=$(realpath -m "$2")
height=${3:-4000}
for tool in pandoc chromium; do
    if ! command -v "$tool" >/dev/null; then
        echo "error: $tool is not installed (Debian: apt-get install $tool)" >&2
        exit 2
    fi
done
if [ ! -f "$run/report.md" ]; then
    echo "error: no report.md in $run (render it with: pipeline report $run)" >&2
    exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/style.html" <<'CSS'
<style>
body { max-width: 1120px; margin: 16px auto; font-family: "DejaVu Sans", sans-serif; font-size: 14px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 2px 6px; }
img { max-width: 100%; display: block; margin: 6px 0; }
pre { background: #f6f6f6; padding: 6px; overflow: hidden; }
</style>
CSS
# --self-contained inlines the charts (read from RUN_DIR), so the page
# needs nothing but itself.
(cd "$run" && pandoc --from gfm --to html5 --standalone --self-contained \
    --metadata pagetitle="$(basename "$run")" --include-in-header "$tmp/style.html" \
    --output "$tmp/report.html" report.md)
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size="1200,$height" --screenshot="$out" "file://$tmp/report.html" \
    2> >(grep -v -e "dbus" -e "Fontconfig" -e "^$" >&2 || true)
echo "screenshot: $out"
