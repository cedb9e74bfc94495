#!/usr/bin/env bash
# paths.sh — no tracked file may name an absolute path outside the repository:
# a test that reads a file in its author's home folder or worktree passes for
# its author and fails on every fresh clone (CI clones main to a new temporary
# path). Checks itself too. Flags the usual homes of worktrees (/work, /home,
# /root, /Users, /mnt, /srv, /scratch, /data, /workspace, /nfs) and this
# checkout's own absolute path and its parent's.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root" || exit 1
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	echo "paths: not a git checkout, skipped"
	exit 0
fi
parent=$(dirname "$root")
pat='(^|[^A-Za-z0-9_.~/-])/(work|home|root|Users|mnt|srv|scratch|data|workspace|nfs)/[A-Za-z0-9_.-]'
files() { git ls-files -z -- .; }
hits=$(files | xargs -0 grep -InE "$pat" -- 2>/dev/null)
for p in "$root" "$parent"; do
	case $p in /|/tmp|/var/tmp|"${TMPDIR:-/tmp}") continue ;; esac
	more=$(files | xargs -0 grep -InF -- "$p/" 2>/dev/null)
	[ -n "$more" ] && hits=$(printf '%s\n%s' "$hits" "$more")
done
hits=$(printf '%s\n' "$hits" | sed '/^$/d' | sort -u)
if [ -n "$hits" ]; then
	printf '%s\n' "$hits" | head -20
	echo "paths: FAIL — $(printf '%s\n' "$hits" | wc -l) line(s) name an absolute path outside the repository; build paths from the file's own location"
	exit 1
fi
echo "paths: no tracked file names an absolute path outside the repository ✓"
