#!/bin/sh
# Conversations in the Chat page's sidebar under Xvfb, driven with xdotool
# through the keyboard as a person would, and checked against what the app
# persists (one JSON file per conversation under a temporary XDG_DATA_HOME)
# and the files it exports. No model is needed: three conversations are
# written before the app starts.
#
#   1. Ctrl+F, "keel", Enter: the first match (a word inside a reply, not a
#      title) opens; F2, type a title, Enter: that file's title changes, the
#      others stay as they were.             (light, 1280x800)
#   2. Escape, Ctrl+F, "clouds", Enter, Delete: only that file is gone.
#   3. Restart; Ctrl+F "sailing" Enter; Ctrl+Shift+E: GTK's file chooser, a
#      path typed, Enter: the Markdown export holds the title and every
#      message.                               (dark, 800x600)
#   4. Ctrl+Shift+J: the JSON export parses and equals the persisted file.
#   5. Restart: the rename and the delete were kept. (light, 800x600)
# A screenshot after each goes to ARTIFACT_DIR.
#
# usage: conversations.sh RLX_STUDIO ARTIFACT_DIR
set -u

app=$1
art=$2

ui_log=conversations
. "$(dirname "$0")/lib.sh"

if [ -z "${RLX_CONV_IN_XVFB:-}" ]; then
    ui_need xvfb-run xdotool import python3
    ui_enter_xvfb RLX_CONV_IN_XVFB "$@"
fi

ui_env "$art/conversations"
mkdir -p "$work/export" "$convs"
# GTK's own file chooser, not a portal's (none runs under this private bus).
GTK_USE_PORTAL=0
export GTK_USE_PORTAL

settings() {
    printf '[org/rlx/Studio]\nwindow-width=%s\nwindow-height=%s\n' "$1" "$2" >"$keyfile"
}

# Keep the pointer off the windows: no tooltip pops up over what is typed.
park_pointer() {
    xdotool mousemove 1279 799
}

# start NAME [ASAN_OPTIONS]: run rlx-studio, wait for its window, set $wid.
start() {
    name=$1
    ASAN_OPTIONS=${2:-${ASAN_OPTIONS:-}} "$app" >"$art/conversations-$name.log" 2>&1 &
    pid=$!
    wid=$(wait_window 'RLX Studio$') || fail "no rlx-studio window after 30 s ($name)"
    xdotool windowfocus --sync "$wid" || fail "cannot focus the window"
}

# wait_gone REGEX: up to 30 s for no visible window so named.
wait_gone() {
    i=0
    while xdotool search --onlyvisible --name "$1" >/dev/null 2>&1; do
        [ $i -lt 150 ] || fail "the window '$1' is still open after 30 s"
        sleep 0.2
        i=$((i + 1))
    done
}

# title ID: the persisted title of conversation ID.
title() {
    field "$convs/$1.json" title
}

# keys KEY...: keystrokes to the focused window.
keys() {
    xdotool key --clearmodifiers "$@"
}

type_text() {
    xdotool type --delay 20 "$1"
}

# search TEXT: Ctrl+F, TEXT, Enter (opens the first conversation that matches).
search() {
    keys ctrl+f
    keys ctrl+a
    type_text "$1"
    keys Return
}

# The conversations, newest first: A, B (the word "keel" is only in its
# reply), C. Quotes, a backslash, non-ASCII and Markdown in the texts.
python3 - "$convs" <<'EOF'
import json, sys, time
now = int(time.time())
def conv(cid, title, updated, msgs, system=""):
    json.dump({"version": 1, "id": cid, "title": title, "system": system,
               "created": now - 1000, "updated": updated,
               "messages": [{"role": r, "content": c} for r, c in msgs]},
              open(f"{sys.argv[1]}/{cid}.json", "w"), ensure_ascii=False, indent=2)
conv("conv-a", "Apples and pears", now + 30,
     [("user", "Tell me about fruit"), ("assistant", "Apples are *crunchy*; pears are soft.")])
conv("conv-b", "Boats", now + 20,
     [("user", "How do sailboats work?"),
      ("assistant", "The wind pushes on the sail, and the keel keeps the boat on course.\n\n"
                    "- \"close-hauled\": into the wind\n- `C:\\boats` — naïve café, Ωμέγα")],
     system="You are a sailor.")
conv("conv-c", "Clouds", now + 10,
     [("user", "Why is the sky blue?"), ("assistant", "Rayleigh scattering.")])
EOF

# 1. search, then rename what it found (light, 1280x800) ----------------------
settings 1280 760
park_pointer
start light
search keel
keys F2
dlg=$(wait_window '^Rename Conversation$') || fail "F2 opened no Rename dialog"
xdotool windowfocus --sync "$dlg" || fail "cannot focus the Rename dialog"
keys ctrl+a
type_text "Sailing notes"
keys Return
wait_gone '^Rename Conversation$'
xdotool windowfocus --sync "$wid"
wait_for "conv-b not renamed: '$(title conv-b)'" test "$(title conv-b)" = "Sailing notes"
[ "$(title conv-a)" = "Apples and pears" ] || fail "conv-a renamed too: $(title conv-a)"
[ "$(title conv-c)" = "Clouds" ] || fail "conv-c renamed too: $(title conv-c)"
# A title the user gave is flagged, so that editing the first message keeps it.
python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1])).get("title_set") is not True)' \
    "$convs/conv-b.json" || fail "conv-b's new title is not flagged title_set"
echo "renamed the conversation found by 'keel'"
shot light-search-rename

# 2. search by title, Delete in the list --------------------------------------
keys Escape
search clouds
keys Delete
wait_for "conv-c.json still there after Delete" test ! -e "$convs/conv-c.json"
wait_log "Conversation deleted"
[ -e "$convs/conv-a.json" ] && [ -e "$convs/conv-b.json" ] || fail "Delete removed another file"
echo "deleted the conversation found by 'clouds'"
shot light-delete
quit
check_log light

# 3. restart (dark, 800x600): export the renamed one as Markdown --------------
# This run opens GTK's file chooser, which leaks at exit in GTK 4.8 itself:
# its places sidebar's libcloudproviders (a GString of g_build_filename, a
# GError, GDBus proxies), GtkTreeView paths, a GDateTime. valgrind
# --leak-check=full on the release build names those libraries with no frame
# of ours; under ASan the stacks stop in GLib/GIO (no frame pointers there),
# so neither tests/lsan.supp nor leaks.sh can tell them from ours. So this
# run alone is not leak-checked (ASan still checks memory errors); the runs
# before and after it (1-2, 5), chat.sh and drop.sh are.
settings 800 600
ADW_DEBUG_COLOR_SCHEME=prefer-dark
export ADW_DEBUG_COLOR_SCHEME
start dark "${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
unset ADW_DEBUG_COLOR_SCHEME
[ ! -e "$convs/conv-c.json" ] || fail "the deleted conversation came back"
[ "$(title conv-b)" = "Sailing notes" ] || fail "the new title was not kept: $(title conv-b)"

# export FORMAT KEY DIALOG_TITLE FILE: the export action through its shortcut
# and GTK's save dialog (the path typed into its name entry).
export_as() {
    keys "$2"
    dlg=$(wait_window "^$3\$") || fail "$2 opened no '$3' dialog"
    xdotool windowfocus --sync "$dlg" || fail "cannot focus the '$3' dialog"
    # The name entry has the focus (the suggested name selected); Ctrl+L
    # would focus it too. A whole path there saves into that folder.
    keys ctrl+a
    type_text "$4"
    keys Return
    wait_gone "^$3\$"
    xdotool windowfocus --sync "$wid"
    wait_for "no $4 after the '$3' dialog" test -s "$4"
}

search sailing
export_as md ctrl+shift+e "Export as Markdown" "$work/export/sailing.md"
wait_log "Conversation exported"
python3 - "$work/export/sailing.md" "$convs/conv-b.json" <<'EOF' || fail "the Markdown export is wrong"
import json, sys
md = open(sys.argv[1], encoding="utf-8").read()
c = json.load(open(sys.argv[2], encoding="utf-8"))
expected = "# Sailing notes\n\n**System:** You are a sailor.\n\n"
names = {"user": "You", "assistant": "Assistant"}
for m in c["messages"]:
    expected += "## %s\n\n%s\n\n" % (names[m["role"]], m["content"])
if md != expected:
    print("got:\n" + md + "\nexpected:\n" + expected)
    sys.exit(1)
EOF
echo "Markdown export: $(wc -c <"$work/export/sailing.md") bytes"
shot dark-800x600-export-md

# 4. the same as JSON ---------------------------------------------------------
export_as json ctrl+shift+j "Export as JSON" "$work/export/sailing.json"
python3 - "$work/export/sailing.json" "$convs/conv-b.json" <<'EOF' || fail "the JSON export is wrong"
import json, sys
e = json.load(open(sys.argv[1], encoding="utf-8"))
c = json.load(open(sys.argv[2], encoding="utf-8"))
assert e == c, (e, c)
assert e["title"] == "Sailing notes" and e["id"] == "conv-b", e
assert [m["role"] for m in e["messages"]] == ["user", "assistant"], e
assert "naïve café, Ωμέγα" in e["messages"][1]["content"], e
assert '"close-hauled"' in e["messages"][1]["content"], e
EOF
echo "JSON export equals the saved conversation"
shot dark-800x600-export-json
quit
check_log dark

# 5. restart (light, 800x600): what the first runs did is still there ----------
start light-800x600
[ "$(title conv-b)" = "Sailing notes" ] || fail "conv-b's title after a restart: $(title conv-b)"
[ "$(title conv-a)" = "Apples and pears" ] || fail "conv-a's title after a restart: $(title conv-a)"
[ ! -e "$convs/conv-c.json" ] || fail "the deleted conversation came back"
ls "$convs"/*.json | wc -l | grep -qx 2 || fail "not 2 conversations: $(ls "$convs")"
shot light-800x600-restart
quit
check_log light-800x600

echo "PASS"
