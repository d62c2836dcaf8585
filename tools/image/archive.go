package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The annotations that name the image in an OCI layout's index.json: the
// OCI one (podman, skopeo), and containerd's (Docker's containerd image
// store, ctr and kind load), which such loaders take as the image's name
// as is, where they would drop or keep verbatim a ref.name alone.
const (
	refNameAnnotation   = "org.opencontainers.image.ref.name"
	imageNameAnnotation = "io.containerd.image.name"
)

// indexAnnotations names ref in index.json. containerd's name must be a
// full reference, so it is given only when ref names its registry (the
// default localhost/flecht:TAG does): a bare flecht:TAG would want the
// default registry spelt out, which this tool leaves to the loader.
func indexAnnotations(ref string) map[string]string {
	a := map[string]string{refNameAnnotation: ref}
	if first, _, ok := strings.Cut(ref, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		a[imageNameAnnotation] = ref
	}
	return a
}

// writeArchive writes img as an OCI image layout in a tar (oci-layout,
// index.json, blobs/sha256/...), with a Docker manifest.json beside it that
// names the same blobs, as docker save has written since Docker 25: podman
// load, skopeo's oci-archive: and docker load read the layout, older
// docker load and crane push the manifest.json. go-containerregistry
// writes a layout only to a directory, and its docker tarball has no
// index.json, hence this.
func writeArchive(w io.Writer, img v1.Image, ref string, platform v1.Platform, mtime time.Time) error {
	tw := tar.NewWriter(w)
	write := func(name string, data []byte) error {
		return writeEntry(tw, name, int64(len(data)), mtime, func(w io.Writer) (int64, error) {
			n, err := w.Write(data)
			return int64(n), err
		})
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		h := &tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: mtime, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("archive entry %s: %w", dir, err)
		}
	}

	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("layers: %w", err)
	}
	var layerPaths []string
	for _, l := range layers {
		digest, err := l.Digest()
		if err != nil {
			return fmt.Errorf("layer digest: %w", err)
		}
		size, err := l.Size()
		if err != nil {
			return fmt.Errorf("layer size: %w", err)
		}
		name := blobPath(digest)
		err = writeEntry(tw, name, size, mtime, func(w io.Writer) (int64, error) {
			rc, err := l.Compressed()
			if err != nil {
				return 0, err
			}
			defer rc.Close()
			return io.Copy(w, rc)
		})
		if err != nil {
			return err
		}
		layerPaths = append(layerPaths, name)
	}

	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	configName, err := img.ConfigName()
	if err != nil {
		return fmt.Errorf("config digest: %w", err)
	}
	if err := write(blobPath(configName), rawConfig); err != nil {
		return err
	}
	rawManifest, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("manifest digest: %w", err)
	}
	mediaType, err := img.MediaType()
	if err != nil {
		return fmt.Errorf("manifest media type: %w", err)
	}
	if err := write(blobPath(digest), rawManifest); err != nil {
		return err
	}

	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType:   mediaType,
			Size:        int64(len(rawManifest)),
			Digest:      digest,
			Platform:    &platform,
			Annotations: indexAnnotations(ref),
		}},
	})
	if err != nil {
		return fmt.Errorf("index.json: %w", err)
	}
	if err := write("index.json", index); err != nil {
		return err
	}
	dockerManifest, err := json.Marshal(tarball.Manifest{{
		Config:   blobPath(configName),
		RepoTags: []string{ref},
		Layers:   layerPaths,
	}})
	if err != nil {
		return fmt.Errorf("manifest.json: %w", err)
	}
	if err := write("manifest.json", dockerManifest); err != nil {
		return err
	}
	if err := write("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	return nil
}

func blobPath(h v1.Hash) string {
	return "blobs/" + h.Algorithm + "/" + h.Hex
}

// writeEntry writes one regular file of size bytes, refusing a body of
// another length (a blob that is not what its descriptor says).
func writeEntry(tw *tar.Writer, name string, size int64, mtime time.Time, body func(io.Writer) (int64, error)) error {
	h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644, ModTime: mtime, Format: tar.FormatUSTAR}
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("archive entry %s: %w", name, err)
	}
	n, err := body(tw)
	if err != nil {
		return fmt.Errorf("archive entry %s: %w", name, err)
	}
	if n != size {
		return fmt.Errorf("archive entry %s: wrote %d bytes, its descriptor says %d", name, n, size)
	}
	return nil
}
