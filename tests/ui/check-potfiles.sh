#!/bin/sh
# Every file of rlx-studio with translatable strings (_( ), N_( ), C_( ),
# ngettext( ) in C; translatable="yes" in .ui; the .desktop.in, metainfo
# and GSettings schema) is listed in po/POTFILES, and every file listed
# there exists (and is well-formed, if XML): a file missing from the list
# would ship untranslated.
#
# usage: check-potfiles.sh SOURCE_ROOT
set -u
root=$1
cd "$root" || exit 1
listed=$(grep -v '^#' po/POTFILES | grep -v '^[[:space:]]*$')
status=0
for f in $listed; do
    [ -f "$f" ] || { echo "po/POTFILES lists $f, which does not exist"; status=1; }
done
for f in app/*.c ui/*.c ui/*.ui resources/gtk/*.ui resources/*.desktop.in \
    resources/*.metainfo.xml.in resources/*.gschema.xml.in; do
    [ -f "$f" ] || continue
    case "$f" in
    *.c) grep -q -E '(^|[^A-Za-z0-9_])(N?_|C_|NC_|g_dngettext|ngettext)\(' "$f" || continue ;;
    *.ui) grep -q 'translatable="yes"' "$f" || continue ;;
    esac
    if ! printf '%s\n' "$listed" | grep -q -x -F "$f"; then
        echo "$f has translatable strings but is not in po/POTFILES"
        status=1
    fi
done
# xgettext reads the XML ones as XML; msgfmt merges a broken one without a word.
if command -v xmllint >/dev/null 2>&1; then
    for f in $listed; do
        case "$f" in
        *.ui | *.xml | *.xml.in) xmllint --noout "$f" || { echo "$f is not well-formed XML"; status=1; } ;;
        esac
    done
fi
[ $status = 0 ] && echo "po/POTFILES lists every file with translatable strings"
exit $status
