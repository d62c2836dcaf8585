package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's layout. docs/image.md and examples/kubernetes rely on these.
const (
	userID     = 65532 // as distroless' nonroot: far from any host's own users
	userName   = "flecht"
	entrypoint = "/usr/local/bin/flecht"
	caFile     = "/etc/ssl/certs/ca-certificates.crt"
	homeDir    = "/var/lib/flecht" // HOME, the working directory and the state root
)

// imageMeta is what the labels and the history say about the build.
type imageMeta struct {
	version string
	source  string
	created time.Time
}

// file is one entry of the image's only layer.
type file struct {
	name string // relative, without a leading slash, as layers spell it
	mode int64
	uid  int
	data []byte // nil for a directory
}

// rootfs is the layer's tar: the binary, the CA certificates, the user and
// its home; every entry dated mtime, so the same inputs give the same bytes.
func rootfs(binary, ca []byte, mtime time.Time) ([]byte, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n",
		userName, userID, userID, userName, homeDir)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", userName, userID)
	files := []file{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: caFile[1:], mode: 0o644, data: ca},
		// Sticky and world-writable, as os.TempDir expects it.
		{name: "tmp/", mode: 0o1777},
		{name: "usr/", mode: 0o755},
		{name: "usr/local/", mode: 0o755},
		{name: "usr/local/bin/", mode: 0o755},
		{name: entrypoint[1:], mode: 0o755, data: binary},
		{name: "var/", mode: 0o755},
		{name: "var/lib/", mode: 0o755},
		// The user's own: a volume mounted here starts with its owner.
		{name: homeDir[1:] + "/", mode: 0o755, uid: userID},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.name,
			Mode:    f.mode,
			Uid:     f.uid,
			Gid:     f.uid,
			Uname:   "root",
			Gname:   "root",
			ModTime: mtime,
			Format:  tar.FormatUSTAR,
		}
		if f.uid == userID {
			h.Uname, h.Gname = userName, userName
		}
		if f.data == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}

// buildImage is the image: one layer on scratch, OCI media types, and a
// config that runs the binary as the non-root user.
func buildImage(layerTar []byte, bin binaryInfo, meta imageMeta) (v1.Image, error) {
	layer, err := tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil },
		tarball.WithMediaType(types.OCILayer),
		// Level 9 saves under 1% over the default, at three times the time.
		tarball.WithCompressionLevel(gzip.DefaultCompression),
		// Compress once: the digest and the archive read it twice.
		tarball.WithCompressedCaching,
	)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	created := v1.Time{Time: meta.created}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   created,
			CreatedBy: "make image (tools/image)",
			Comment:   "flecht, CA certificates, user " + userName,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("appending the layer: %w", err)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)

	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS = bin.platform.OS
	cf.Architecture = bin.platform.Architecture
	cf.Variant = bin.platform.Variant
	labels := map[string]string{
		"org.opencontainers.image.title":       "flecht",
		"org.opencontainers.image.description": "Runs and operates Kafka stream-processing pipelines",
		"org.opencontainers.image.created":     meta.created.Format(time.RFC3339),
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.source":   meta.source,
		"org.opencontainers.image.version":  meta.version,
		"org.opencontainers.image.revision": bin.revision,
	} {
		if v != "" {
			labels[k] = v
		}
	}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", userID, userID),
		Entrypoint: []string{entrypoint},
		WorkingDir: homeDir,
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			// Set, not left to each runtime's reading of /etc/passwd: the
			// default state and module cache directories derive from it.
			"HOME=" + homeDir,
			"SSL_CERT_FILE=" + caFile,
		},
		Labels: labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return img, nil
}
