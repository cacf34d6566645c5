#!/usr/bin/env python3
"""Writes an OCI image layout (image-spec 1.1) of one layer from a root folder, and the same
layout as a tar archive (`oci-archive:` for podman and skopeo). The layer is reproducible:
entries sorted by name, times set to SOURCE_DATE_EPOCH (0 by default), owners as numbers.

Usage: oci-image.py ROOTFS LAYOUT-DIR ARCHIVE NAME:TAG (docs/operations.md, "The container image").
"""
import gzip, hashlib, io, json, os, platform, shutil, sys, tarfile

root, layout, archive, reference = sys.argv[1:5]
name, tag = reference.rsplit(":", 1)
epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))


def layer_bytes():
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        paths = []
        for directory, folders, files in os.walk(root):
            folders.sort()
            for entry in sorted(folders + files):
                paths.append(os.path.join(directory, entry))
        for path in sorted(paths, key=lambda p: os.path.relpath(p, root)):
            info = tar.gettarinfo(path, arcname=os.path.relpath(path, root))
            info.mtime = epoch
            info.uname = info.gname = ""
            if info.isfile():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return buffer.getvalue()


def blob(data):
    digest = hashlib.sha256(data).hexdigest()
    os.makedirs(os.path.join(layout, "blobs", "sha256"), exist_ok=True)
    with open(os.path.join(layout, "blobs", "sha256", digest), "wb") as f:
        f.write(data)
    return "sha256:" + digest


shutil.rmtree(layout, ignore_errors=True)
os.makedirs(layout)
raw = layer_bytes()
compressed = gzip.compress(raw, compresslevel=9, mtime=epoch)
layer_digest = blob(compressed)
architecture = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
config = {
    "architecture": architecture,
    "os": "linux",
    "config": {
        "User": "10001:10001",
        "Entrypoint": ["/usr/local/bin/midtier"],
        "Cmd": ["serve", "--config", "/etc/midtier"],
        "WorkingDir": "/var/lib/midtier",
        "Env": ["PATH=/usr/local/bin:/usr/bin"],
        "ExposedPorts": {"8080/tcp": {}, "9090/tcp": {}},
        "Volumes": {"/var/lib/midtier": {}, "/tmp": {}},
        "StopSignal": "SIGTERM",
        "Labels": {
            "org.opencontainers.image.title": "Midtier",
            "org.opencontainers.image.version": tag,
            "org.opencontainers.image.description": "Mobile-services middle tier; built from Debian packages (scripts/build-image.sh)",
        },
    },
    "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]},
    "history": [{"created_by": "scripts/build-image.sh: release binary, Debian libraries, CA bundle, time zones"}],
}
config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
config_digest = blob(config_bytes)
manifest = {
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": len(config_bytes)},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer_digest, "size": len(compressed)}],
}
manifest_bytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
manifest_digest = blob(manifest_bytes)
index = {
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.index.v1+json",
    "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_digest, "size": len(manifest_bytes),
                   "annotations": {"org.opencontainers.image.ref.name": tag, "io.containerd.image.name": f"{name}:{tag}"}}],
}
with open(os.path.join(layout, "index.json"), "w") as f:
    json.dump(index, f, sort_keys=True)
with open(os.path.join(layout, "oci-layout"), "w") as f:
    json.dump({"imageLayoutVersion": "1.0.0"}, f)
with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
    for directory, folders, files in os.walk(layout):
        folders.sort()
        for entry in sorted(files):
            path = os.path.join(directory, entry)
            info = tar.gettarinfo(path, arcname=os.path.relpath(path, layout))
            info.mtime, info.uid, info.gid, info.uname, info.gname = epoch, 0, 0, "", ""
            with open(path, "rb") as f:
                tar.addfile(info, f)
print(f"image {name}:{tag}: manifest {manifest_digest}, layer {len(compressed) / 1048576:.1f} MiB compressed "
      f"({len(raw) / 1048576:.1f} MiB)")
