#!/bin/sh
# mkdeb.sh BUILT OUTDIR MULTIARCH: a Debian package of backoffshim from a
# tree built with PREFIX=/usr (BUILT holds libbackoffshim.so, backoffshim and
# man/, the pages made for the packaged library's place),
# written to OUTDIR/backoffshim_VERSION_ARCH.deb with dpkg-deb.
#   /usr/bin/backoffshim
#   /usr/lib/MULTIARCH/backoffshim/libbackoffshim.so   (a private directory:
#       the library is preloaded by path, never linked against)
#   /etc/backoffshim.ini                                (a conffile)
#   /usr/share/man/man1/backoffshim.1.gz, man5/backoffshim.ini.5.gz
#   /usr/share/bash-completion/completions/backoffshim, and zsh's and fish's
#   /usr/share/doc/backoffshim/copyright, changelog.gz (CHANGELOG.md's first
#       section, which must be this version's), README.md, docs/
set -eu
built=$1 out=$2 multiarch=$3
top=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^#define BS_VERSION "\(.*\)"/\1/p' "$top/shim/common/version.h")
arch=$(dpkg --print-architecture)
root=$out/deb-root
rm -rf "$root"
umask 022
d() { install -d "$root/$1"; }
d DEBIAN; d usr/bin; d "usr/lib/$multiarch/backoffshim"; d etc
d usr/share/man/man1; d usr/share/man/man5; d usr/share/bash-completion/completions
d usr/share/zsh/vendor-completions; d usr/share/fish/vendor_completions.d
d usr/share/doc/backoffshim/docs
install -m 0755 -s "$built/backoffshim" "$root/usr/bin/backoffshim"
install -m 0644 -s "$built/libbackoffshim.so" "$root/usr/lib/$multiarch/backoffshim/libbackoffshim.so"
install -m 0644 "$top/config/backoffshim.ini" "$root/etc/backoffshim.ini"
gzip -9n < "$built/man/backoffshim.1" > "$root/usr/share/man/man1/backoffshim.1.gz"
gzip -9n < "$built/man/backoffshim.ini.5" > "$root/usr/share/man/man5/backoffshim.ini.5.gz"
install -m 0644 "$top/completions/backoffshim" "$root/usr/share/bash-completion/completions/backoffshim"
install -m 0644 "$top/completions/_backoffshim" "$root/usr/share/zsh/vendor-completions/_backoffshim"
install -m 0644 "$top/completions/backoffshim.fish" \
	"$root/usr/share/fish/vendor_completions.d/backoffshim.fish"
install -m 0644 "$top/README.md" "$root/usr/share/doc/backoffshim/README.md"
install -m 0644 "$top"/docs/* "$root/usr/share/doc/backoffshim/docs/"
{
	echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
	echo "Upstream-Name: backoffshim"
	echo
	echo "Files: *"
	echo "Copyright: 2026 The backoffshim authors"
	echo "License: Expat"
	sed -n '3,$s/^$/./;3,$s/^/ /p' "$top/LICENSE"
} > "$root/usr/share/doc/backoffshim/copyright"
chmod 0644 "$root/usr/share/doc/backoffshim/copyright"
date=$(git -C "$top" log -1 --format=%cD 2>/dev/null || date -R)
# CHANGELOG.md's first "## VERSION" section, its "- " items as "  * "
first=$(sed -n 's/^## //p' "$top/CHANGELOG.md" | head -1)
[ "$first" = "$version" ] || {
	echo "mkdeb.sh: CHANGELOG.md's first section is '$first', not $version" >&2; exit 1; }
{
	echo "backoffshim ($version) unstable; urgency=medium"
	echo
	awk '/^## / { n++; next } n == 1 && /^- / { sub(/^- /, "  * "); print; next }
		n == 1 && /^  [^ ]/ { print "  " $0 }' "$top/CHANGELOG.md"
	echo
	echo " -- The backoffshim authors <maintainers@backoffshim.org>  $date"
} | gzip -9n > "$root/usr/share/doc/backoffshim/changelog.gz"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
# the newest glibc symbol version the two binaries need (not the build
# machine's glibc, which may be newer)
glibc=$(objdump -T "$built/libbackoffshim.so" "$built/backoffshim" |
	sed -n 's/.*GLIBC_\([0-9][0-9.]*\).*/\1/p' | sort -t. -k1,1n -k2,2n -k3,3n | tail -1)
[ -n "$glibc" ] || { echo "mkdeb.sh: cannot read the glibc versions the binaries need (objdump)" >&2; exit 1; }
depends="libc6 (>= $glibc)"
cat > "$root/DEBIAN/control" <<CONTROL
Package: backoffshim
Version: $version
Architecture: $arch
Maintainer: The backoffshim authors <maintainers@backoffshim.org>
Installed-Size: $size
Depends: $depends
Section: net
Priority: optional
Homepage: https://github.com/backoffshim/backoffshim
Description: gRPC connection backoff for unmodified programs (LD_PRELOAD)
 libbackoffshim.so is preloaded into programs that cannot be changed.
 When a connect() fails with a retryable error it is retried on the
 gRPC connection-backoff schedule, one schedule per destination for the
 whole host; the program sees a connect that completes later. The
 backoffshim command runs programs with it, previews the schedule, checks
 configuration files and shows or resets the backoff state.
CONTROL
echo /etc/backoffshim.ini > "$root/DEBIAN/conffiles"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\n' | LC_ALL=C sort |
	xargs md5sum) > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles" "$root/DEBIAN/md5sums"
deb=$out/backoffshim_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
