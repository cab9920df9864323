# Sourced by the UI tests (POSIX sh). LeakSanitizer in the ASan build.
#
# only_glib_quark_leak LOG: true when the only sanitizer report in LOG (an
# rlx-studio run that exited non-zero) is GLib's quark block:
#
#   Direct leak of 16384 byte(s) in 1 object(s) allocated from:
#       #0 ... in __interceptor_malloc
#       #1 ... in g_malloc (libglib-2.0.so.0+...)
#
# GLib allocates its first quark array (2048 pointers, 16 KiB) in its library
# constructor, before main(), and drops it on purpose when the 2049th quark is
# made (gquark.c, g_quark_new: "This leaks the old quarks array ... it allows
# us to do lockless lookup"). rlx-studio passes 2048 quarks once GtkSourceView
# highlights a code block. valgrind --leak-check=full on the release build shows
# the whole stack (g_malloc <- glib <- _dl_init <- ld.so); under ASan the stack
# stops at g_malloc (GLib has no frame pointers), so no line in tests/lsan.supp
# can name it without also hiding every other g_malloc leak. This check accepts
# exactly that block: any other leak, any more frames (a g_malloc from our code
# shows our frames), or any ASan/UBSan error still fails.
only_glib_quark_leak() {
    python3 - "$1" <<'PYEOF'
import re, sys
log = open(sys.argv[1], errors="replace").read()
if "ERROR: AddressSanitizer" in log or "runtime error:" in log:
    sys.exit(1)
head = "ERROR: LeakSanitizer: detected memory leaks"
if head not in log:
    sys.exit(1)
report = log.split(head, 1)[1]
blocks = re.findall(r"^(Direct|Indirect) leak of (\d+) byte\(s\) in (\d+) object\(s\) "
                    r"allocated from:\n((?:[ \t]+#.*\n?)*)", report, re.M)
if len(blocks) != 1:
    sys.exit(1)
kind, size, count, frames = blocks[0]
frames = frames.strip().splitlines()
ok = (kind == "Direct" and size == "16384" and count == "1" and len(frames) == 2
      and "malloc" in frames[0] and " in g_malloc " in frames[1])
sys.exit(0 if ok else 1)
PYEOF
}

# lsan_tracer_crashed LOG: true when LeakSanitizer itself crashed at exit
# ("Tracer caught signal 11" then "LeakSanitizer has encountered a fatal
# error"), with no ASan/UBSan report and no leak report. Its tracer thread
# stops the others with ptrace to read their registers; on this project's CI
# machines (GCC 12's libasan, Linux 6.18) it died that way twice in about ten
# ASan runs of the UI tests, always at the same instruction in libasan, in
# runs that had failed to load a model and in one that had replied. Such a run
# did not check for leaks; the other runs of the same test still do.
lsan_tracer_crashed() {
    grep -q "Tracer caught signal" "$1" &&
        grep -q "LeakSanitizer has encountered a fatal error" "$1" &&
        ! grep -q -e "ERROR: AddressSanitizer" -e "runtime error:" \
            -e "ERROR: LeakSanitizer: detected memory leaks" "$1"
}

# app_exit_ok RC LOG: rlx-studio's exit status RC is a pass (0, or only GLib's
# quark block reported by LeakSanitizer, or LeakSanitizer's own crash at
# exit, see above).
app_exit_ok() {
    [ "$1" -eq 0 ] && return 0
    if only_glib_quark_leak "$2"; then
        echo "LeakSanitizer: only GLib's quark block (16 KiB, see tests/ui/leaks.sh) in $2"
        return 0
    fi
    if lsan_tracer_crashed "$2"; then
        echo "LeakSanitizer crashed at exit, no leak check for this run (see tests/ui/leaks.sh): $2"
        return 0
    fi
    return 1
}
