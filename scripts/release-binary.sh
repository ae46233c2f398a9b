#!/usr/bin/env bash
# Prints the path of a onelog release's `onelog` binary, building it once if it is missing:
#
#   scripts/release-binary.sh 0.1.0      # e.g. ONELOG_OLD_BIN="$(scripts/release-binary.sh 0.1.0)"
#
# The binary lives in ${ONELOG_RELEASES:-$HOME/.cache/onelog-releases}/VERSION/onelog, beside a
# `commit` file naming the commit it was built from. To build it, the script checks the
# release's commit out in a temporary `git worktree add --detach` (ONELOG_RELEASES/.build-VERSION,
# the same path every time, so a rebuild reuses the same compiled crates rather than adding new
# ones), runs `cargo build -p broker` there (debug profile, default features: a release as users
# run it; the upgrade runs inject no fault, so it needs no `fault-injection`; no incremental
# cache, which would only take disk), copies the binary and removes the worktree.
#
# Where it builds, and why: the compiler's intermediate files go to the shared target directory
# (cargo's `build.build-dir` = CARGO_TARGET_DIR, default ~/.cache/onelog-target), so proc-macros
# and build scripts already compiled there are reused, and the final binary to a private
# artifact directory, so `$CARGO_TARGET_DIR/debug/onelog` (the current build the tests run) is
# never overwritten. The build names the host triple explicitly (`--target`): cargo then keeps
# every crate of the release in `<build dir>/<triple>/debug`, which the current tree's builds
# (no `--target`) never read. Without it the release's workspace crates would land in
# `debug/deps` under the very file names the current tree's crates have (cargo hashes a path
# crate by its path inside the workspace, not by where the checkout is), and cargo, which
# decides a path crate is fresh by file times, would then link 0.1.0's `kafka-compat` or
# `onelog-state` into the next build of the current tree. (Seen with cargo 1.95: a build of
# the current tree after this script, without `--target`, failed on `kafka_compat::isolation_level`,
# a module 0.1.0 lacks.) A release build itself always compiles its crates: its checkout is
# newer than anything in the directory. Progress goes to stderr; only the path goes to stdout.
set -euo pipefail

# Known releases: version, then the commit it was cut from. Every release that changes a
# format joins this table (and the upgrade test's matrix).
releases="
0.1.0 2fa608f11d6c322cd4122fd584db51be2b23af85
"

die() { echo "release-binary.sh: $*" >&2; exit 1; }

version="${1:-}"
[ -n "$version" ] || die "usage: scripts/release-binary.sh VERSION (known: $(awk 'NF { printf "%s ", $1 }' <<<"$releases"))"
commit="$(awk -v v="$version" '$1 == v { print $2 }' <<<"$releases")"
[ -n "$commit" ] || die "unknown release '$version' (known: $(awk 'NF { printf "%s ", $1 }' <<<"$releases"))"

repo="$(cd "$(dirname "$0")/.." && pwd)"
releases_dir="${ONELOG_RELEASES:-$HOME/.cache/onelog-releases}"
dest="$releases_dir/$version"
if [ -x "$dest/onelog" ] && [ "$(cat "$dest/commit" 2>/dev/null)" = "$commit" ]; then
    echo "$dest/onelog"
    exit 0
fi

if ! git -C "$repo" cat-file -e "$commit^{commit}" 2>/dev/null; then
    # A shallow checkout (as some CI systems make) may still reach the commit from its origin.
    echo "release-binary.sh: this clone lacks $commit; fetching it from origin" >&2
    git -C "$repo" fetch --quiet origin "$commit" >&2 2>/dev/null ||
        git -C "$repo" fetch --quiet --unshallow origin >&2 2>/dev/null || true
fi
if ! git -C "$repo" cat-file -e "$commit^{commit}" 2>/dev/null; then
    shallow="$(git -C "$repo" rev-parse --is-shallow-repository 2>/dev/null || echo unknown)"
    die "this clone ($repo) lacks commit $commit of release $version (shallow clone: $shallow). \
Fetch it first: git fetch --unshallow, or git fetch origin $commit"
fi
command -v cargo >/dev/null || die "cargo not found"

build_dir="${CARGO_TARGET_DIR:-$HOME/.cache/onelog-target}"
mkdir -p "$releases_dir" "$build_dir"
work="$releases_dir/.build-$version"
tree="$work/src"
# One build per version at a time; a second caller waits, then finds the binary.
exec 9>"$releases_dir/.build-$version.lock"
flock 9
if [ -x "$dest/onelog" ] && [ "$(cat "$dest/commit" 2>/dev/null)" = "$commit" ]; then
    echo "$dest/onelog"
    exit 0
fi
git -C "$repo" worktree remove --force "$tree" 2>/dev/null || true
rm -rf "$work"
git -C "$repo" worktree prune
cleanup() {
    git -C "$repo" worktree remove --force "$tree" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "release-binary.sh: building onelog $version from $commit (build dir $build_dir)" >&2
git -C "$repo" worktree add --detach "$tree" "$commit" >&2
host="$(rustc -vV | sed -n 's/^host: //p')"
[ -n "$host" ] || die "rustc -vV names no host triple"
started=$SECONDS
(
    cd "$tree"
    CARGO_INCREMENTAL=0 CARGO_BUILD_BUILD_DIR="$build_dir" CARGO_TARGET_DIR="$work/artifacts" \
        cargo build -p broker --locked --target "$host" >&2
) || die "cargo build -p broker of $version ($commit) failed"
echo "release-binary.sh: built onelog $version in $((SECONDS - started)) s" >&2

mkdir -p "$dest"
cp "$work/artifacts/$host/debug/onelog" "$dest/onelog.tmp"
mv "$dest/onelog.tmp" "$dest/onelog"
echo "$commit" >"$dest/commit"
echo "$dest/onelog"
