// Command image builds `make image`: a minimal OCI image of the static
// flecht binary, written as an OCI archive without a container daemon.
// The image holds the binary at /usr/local/bin/flecht (the entrypoint),
// the build machine's CA certificates, and a non-root user flecht
// (65532:65532) whose home /var/lib/flecht is the working directory.
// Its platform is the binary's own (read from its build info). Every
// date in it is SOURCE_DATE_EPOCH, else the binary's commit time, so the
// same binary gives the same bytes. docs/image.md has the rest.
//
// It is a module of its own so that flecht's module does not depend on
// go-containerregistry.
package main

import (
	"bufio"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

func main() {
	err := run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	binary := fs.String("binary", "", "the static Linux flecht binary (CGO_ENABLED=0 GOOS=linux go build ./cmd/flecht)")
	ca := fs.String("ca", "/etc/ssl/certs/ca-certificates.crt", "the CA certificates (PEM) the image carries")
	out := fs.String("out", "", "the OCI archive (a tar) to write")
	ref := fs.String("name", "", "the image's NAME:TAG (index.json's "+refNameAnnotation+", manifest.json's RepoTags)")
	version := fs.String("version", "", "org.opencontainers.image.version (default the binary's module version)")
	revision := fs.String("revision", "", "org.opencontainers.image.revision (default the binary's vcs.revision)")
	source := fs.String("source", "https://github.com/flecht-dev/flecht", "org.opencontainers.image.source")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	case *binary == "":
		return errors.New("-binary is required")
	case *out == "":
		return errors.New("-out is required")
	case *ref == "":
		return errors.New("-name is required")
	}
	if _, err := name.NewTag(*ref); err != nil {
		return fmt.Errorf("-name %q: %w", *ref, err)
	}
	// A name without its tag would be read as :latest; say which.
	if strings.LastIndex(*ref, ":") < strings.LastIndex(*ref, "/")+1 {
		return fmt.Errorf("-name %q has no tag: give NAME:TAG", *ref)
	}

	caPEM, err := os.ReadFile(*ca)
	if err != nil {
		return fmt.Errorf("CA certificates: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("CA certificates: %s holds no PEM certificate", *ca)
	}
	bin, err := inspectBinary(*binary)
	if err != nil {
		return err
	}
	created, err := buildTime(getenv("SOURCE_DATE_EPOCH"), bin.vcsTime)
	if err != nil {
		return err
	}
	binData, err := os.ReadFile(*binary)
	if err != nil {
		return err
	}
	layer, err := rootfs(binData, caPEM, created)
	if err != nil {
		return err
	}
	meta := imageMeta{version: *version, source: *source, created: created}
	if meta.version == "" {
		meta.version = bin.version
	}
	// Go stamps no VCS information in a git worktree; the Makefile passes it.
	if *revision != "" {
		bin.revision = *revision
	}
	img, err := buildImage(layer, bin, meta)
	if err != nil {
		return err
	}
	size, err := writeFile(*out, func(w io.Writer) error {
		return writeArchive(w, img, *ref, bin.platform, created)
	})
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	platform := bin.platform.OS + "/" + bin.platform.Architecture
	if bin.platform.Variant != "" {
		platform += "/" + bin.platform.Variant
	}
	fmt.Fprintf(stdout, "%s: %s %s %s, %.1f MiB\n", *out, *ref, platform, digest, float64(size)/(1<<20))
	return nil
}

// buildTime is the one date the image carries: SOURCE_DATE_EPOCH when
// set, else the commit's time from the binary, else the Unix epoch; never
// the clock, which would make each build differ.
func buildTime(epoch string, vcsTime time.Time) (time.Time, error) {
	if epoch != "" {
		secs, err := strconv.ParseInt(epoch, 10, 64)
		// Up to 9999: a tar header and RFC 3339 both hold it.
		if err != nil || secs < 0 || secs > 253402300799 {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q is not a count of seconds since 1970 (up to year 9999)", epoch)
		}
		return time.Unix(secs, 0).UTC(), nil
	}
	if !vcsTime.IsZero() {
		return vcsTime, nil
	}
	return time.Unix(0, 0).UTC(), nil
}

// writeFile writes path through a temporary file beside it, so a failed
// build leaves no partial archive, and returns its size.
func writeFile(path string, write func(io.Writer) error) (int64, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	var size int64
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(tmp.Name()); err == nil {
			size = fi.Size()
			err = os.Rename(tmp.Name(), path)
		}
	}
	if err != nil {
		os.Remove(tmp.Name())
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	return size, nil
}
