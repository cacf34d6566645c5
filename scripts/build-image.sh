#!/usr/bin/env bash
# make image: Midtier's OCI image, built from Debian packages only, with no base image
# downloaded (docs/operations.md, "The container image").
#
#   1. the release binary, its Swift runtime linked in (--static-swift-stdlib);
#   2. a staging root of Debian bookworm (mmdebstrap, from Debian's mirror) with the C
#      libraries the binary loads and the CA certificates;
#   3. the image's root: the binary, exactly the shared libraries `ldd` names (from the staging
#      root), the CA bundle, the time zones, /etc/passwd and /etc/group with the midtier user
#      (10001), and the empty folders the manifests mount (/etc/midtier, /var/lib/midtier,
#      /run/credentials/midtier.service, /tmp): no shell, no package manager;
#   4. an OCI image layout (one layer), and the same as an archive (oci-archive) that podman,
#      skopeo or containerd import: .build-image/midtier-image.tar.
#
# Needs root (mmdebstrap's root mode, chroot) and mmdebstrap (installed when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="$PWD/.build-image"
SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
VERSION=$(git describe --always --dirty 2>/dev/null || echo dev)

if ! command -v mmdebstrap >/dev/null; then
  echo "Installing mmdebstrap"
  SUDO=""; if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

echo "== release build (static Swift runtime)"
swift build -c release --static-swift-stdlib --product midtier --scratch-path .build-release
BIN=.build-release/release/midtier

rm -rf "$OUT"
mkdir -p "$OUT"
staging="$OUT/staging"
root="$OUT/rootfs"

echo "== staging root: Debian $SUITE with the libraries Midtier loads"
mmdebstrap --quiet --mode=root --variant=essential \
  --include=libssl3,libxml2,libsqlite3-0,libarchive13,libstdc++6,zlib1g,ca-certificates,tzdata \
  "$SUITE" "$staging" "$MIRROR"
install -D -m 0755 "$BIN" "$staging/usr/local/bin/midtier"

echo "== the image's root"
mkdir -p "$root"
# Without its debug information (a third of its size); the symbols stay, for backtraces.
install -D -m 0755 "$BIN" "$root/usr/local/bin/midtier"
strip --strip-debug "$root/usr/local/bin/midtier"
# Debian's merged /usr: /lib, /lib64, /bin and /sbin are links into /usr.
for link in lib lib64 bin sbin; do
  if [ -L "$staging/$link" ]; then cp -a "$staging/$link" "$root/$link"; fi
done
# Copies `path` of the staging root into the image's root, at its physical place, and each
# symbolic link on the way to the file.
copy_with_links() {
  local path=$1 directory physical target
  while :; do
    directory=$(cd "$staging$(dirname "$path")" && pwd -P)
    directory=${directory#"$staging"}
    physical="$directory/$(basename "$path")"
    mkdir -p "$root$directory"
    cp -a "$staging$physical" "$root$physical"
    [ -L "$staging$physical" ] || break
    target=$(readlink "$staging$physical")
    case $target in /*) path=$target ;; *) path="$directory/$target" ;; esac
  done
}
# Every shared object the binary loads, and the loader.
for library in $(chroot "$staging" ldd /usr/local/bin/midtier | awk '/=> \//{print $3} /^\t\/lib/{print $1}'); do
  copy_with_links "$library"
done
mkdir -p "$root/etc/ssl/certs" "$root/usr/share"
cp -a "$staging/etc/ssl/certs/ca-certificates.crt" "$root/etc/ssl/certs/"
cp -a "$staging/usr/share/zoneinfo" "$root/usr/share/"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nmidtier:x:10001:10001:Midtier:/var/lib/midtier:/usr/sbin/nologin\n' > "$root/etc/passwd"
printf 'root:x:0:\nmidtier:x:10001:\n' > "$root/etc/group"
printf 'hosts: files dns\n' > "$root/etc/nsswitch.conf"
mkdir -p "$root/etc/midtier" "$root/var/lib/midtier" "$root/run/credentials/midtier.service" "$root/tmp" "$root/proc" "$root/dev"
chown 10001:10001 "$root/var/lib/midtier"
chmod 1777 "$root/tmp"

echo "== OCI image layout"
python3 scripts/oci-image.py "$root" "$OUT/oci" "$OUT/midtier-image.tar" "midtier:$VERSION"
du -sh "$root" | awk '{print "root file system: " $1}'
ls -l "$OUT/midtier-image.tar" | awk '{printf "image archive: %.1f MiB\n", $5 / 1048576}'
