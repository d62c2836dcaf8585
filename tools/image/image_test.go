package main

import (
	"archive/tar"
	"bytes"
	"cmp"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// work holds what the tests share: one build of flecht and of this tool.
var (
	work      string
	buildOnce sync.Once
	flechtBin string
	toolBin   string
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "flecht-image-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	work = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// builds returns the static flecht binary, built as `make image` builds
// it but for this machine's architecture so that the test can run it, and
// this tool built without the race detector (which would make its
// compression minutes long).
func builds(t *testing.T) (flecht, tool string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the image's binary runs on Linux only")
	}
	buildOnce.Do(func() {
		flechtBin = filepath.Join(work, "flecht")
		if buildErr = buildFlecht(flechtBin); buildErr != nil {
			return
		}
		toolBin = filepath.Join(work, "imagetool")
		cmd := exec.Command("go", "build", "-o", toolBin, ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build tools/image: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return flechtBin, toolBin
}

func buildFlecht(out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=true", "-o", out, "./cmd/flecht")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/flecht: %v\n%s", err, b)
	}
	return nil
}

// runTool runs the built tool with SOURCE_DATE_EPOCH set to epoch ("" for
// unset) and returns what it printed.
func runTool(t *testing.T, tool, epoch string, args ...string) string {
	t.Helper()
	cmd := exec.Command(tool, args...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SOURCE_DATE_EPOCH=") })
	if epoch != "" {
		cmd.Env = append(cmd.Env, "SOURCE_DATE_EPOCH="+epoch)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("image %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return stdout.String()
}

// writeCA writes a self-signed CA certificate, a bundle the test knows.
func writeCA(t *testing.T) (string, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "flecht image test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	p := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, data
}

// untar unpacks r under root and returns its headers by cleaned name. It
// refuses an entry that would land outside root, and links of any kind
// (the image has none, and a link could point a later entry outside).
func untar(t *testing.T, r io.Reader, root string) map[string]*tar.Header {
	t.Helper()
	hdrs := map[string]*tar.Header{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs
		}
		if err != nil {
			t.Fatalf("reading tar: %v", err)
		}
		name := path.Clean(h.Name)
		if !filepath.IsLocal(filepath.FromSlash(name)) {
			t.Fatalf("tar entry %q escapes the root", h.Name)
		}
		dst := filepath.Join(root, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fs.FileMode(h.Mode).Perm()|0o600)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatalf("tar entry %q: %v", h.Name, err)
			}
		default:
			t.Fatalf("tar entry %q: type %q, not a directory or a regular file", h.Name, h.Typeflag)
		}
		hdrs[name] = h
	}
}

// readArchive unpacks the archive at p and returns its only image, read
// back through the OCI layout, and that layout's directory.
func readArchive(t *testing.T, p string) (v1.Image, v1.Descriptor, string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	untar(t, f, dir)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("reading the OCI layout: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatalf("image %s: %v", desc.Digest, err)
	}
	// The manifest and config are what their descriptors say.
	if err := validate.Image(img, validate.Fast); err != nil {
		t.Fatalf("the image does not validate: %v", err)
	}
	return img, desc, dir
}

func TestImage(t *testing.T) {
	flecht, tool := builds(t)
	caPath, caPEM := writeCA(t)
	out := filepath.Join(t.TempDir(), "bin", "flecht-image.tar")
	const ref, version = "localhost/flecht:test", "v9.9.9-test"
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	printed := runTool(t, tool, fmt.Sprint(created.Unix()),
		"-binary", flecht, "-ca", caPath, "-out", out, "-name", ref, "-version", version)

	img, desc, dir := readArchive(t, out)
	// The layer too: its digest, size and diff ID.
	if err := validate.Image(img); err != nil {
		t.Fatalf("the image does not validate: %v", err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(printed, digest.String()) {
		t.Errorf("the tool printed %q, not the manifest's digest %s", printed, digest)
	}
	for _, k := range []string{refNameAnnotation, imageNameAnnotation} {
		if got := desc.Annotations[k]; got != ref {
			t.Errorf("index.json %s = %q, want %q", k, got, ref)
		}
	}
	if p := desc.Platform; p == nil || p.OS != "linux" || p.Architecture != runtime.GOARCH {
		t.Errorf("index.json platform = %+v, want linux/%s", p, runtime.GOARCH)
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("config platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if c.User != "65532:65532" {
		t.Errorf("config User = %q, want 65532:65532", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/flecht"}) {
		t.Errorf("config Entrypoint = %q", c.Entrypoint)
	}
	if c.WorkingDir != "/var/lib/flecht" || !slices.Contains(c.Env, "HOME=/var/lib/flecht") {
		t.Errorf("config WorkingDir %q, Env %q: want /var/lib/flecht for both", c.WorkingDir, c.Env)
	}
	if !cf.Created.Time.Equal(created) {
		t.Errorf("config created %s, want SOURCE_DATE_EPOCH's %s", cf.Created.Time, created)
	}
	if got := c.Labels["org.opencontainers.image.version"]; got != version {
		t.Errorf("version label %q, want %q", got, version)
	}
	if c.Labels["org.opencontainers.image.source"] == "" {
		t.Error("no org.opencontainers.image.source label")
	}

	// The Docker side of the archive (docker load, crane push) names the
	// same blobs under the same name.
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dm tarball.Manifest
	if err := json.Unmarshal(raw, &dm); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(dm) != 1 || !slices.Equal(dm[0].RepoTags, []string{ref}) {
		t.Errorf("manifest.json = %s, want one image tagged %s", raw, ref)
	}
	dimg, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatalf("reading the archive as a docker tarball: %v", err)
	}
	wantCfg, _ := img.ConfigName()
	if got, err := dimg.ConfigName(); err != nil || got != wantCfg {
		t.Errorf("docker tarball's config %s (%v), want the layout's %s", got, err, wantCfg)
	}
	wantLayers, _ := img.Layers()
	gotLayers, err := dimg.Layers()
	if err != nil || len(gotLayers) != len(wantLayers) {
		t.Fatalf("docker tarball's layers: %d (%v), want %d", len(gotLayers), err, len(wantLayers))
	}
	for i := range gotLayers {
		g, _ := gotLayers[i].Digest()
		w, _ := wantLayers[i].Digest()
		if g != w {
			t.Errorf("docker tarball's layer %d is %s, want %s", i, g, w)
		}
	}

	root := t.TempDir()
	rc := mutate.Extract(img)
	hdrs := untar(t, rc, root)
	rc.Close()

	bin := hdrs["usr/local/bin/flecht"]
	if bin == nil || bin.Mode != 0o755 || bin.Uid != 0 {
		t.Fatalf("/usr/local/bin/flecht: %+v, want root's, mode 0755", bin)
	}
	if !sameFile(t, flecht, filepath.Join(root, "usr/local/bin/flecht")) {
		t.Error("/usr/local/bin/flecht is not the binary built")
	}
	if home := hdrs["var/lib/flecht"]; home == nil || home.Typeflag != tar.TypeDir || home.Uid != 65532 || home.Gid != 65532 {
		t.Errorf("/var/lib/flecht: %+v, want a directory of 65532:65532", home)
	}
	if got, err := os.ReadFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt")); err != nil || !bytes.Equal(got, caPEM) {
		t.Errorf("/etc/ssl/certs/ca-certificates.crt is not the CA file given (%v)", err)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(passwd), "\n"), "flecht:x:65532:65532:flecht:/var/lib/flecht:/sbin/nologin") {
		t.Errorf("/etc/passwd has no entry for flecht (65532):\n%s", passwd)
	}
	group, err := os.ReadFile(filepath.Join(root, "etc/group"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(group), "\n"), "flecht:x:65532:") {
		t.Errorf("/etc/group has no entry for flecht (65532):\n%s", group)
	}

	// The entrypoint runs from the unpacked root (static: no chroot).
	cmd := exec.Command(filepath.Join(root, filepath.FromSlash(c.Entrypoint[0])), "version")
	cmd.Dir = root
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s version: %v", c.Entrypoint[0], err)
	}
	checkVersion(t, flecht, string(got))
}

// checkVersion checks out against what `flecht version` prints
// (internal/cli/version.go) for the binary at bin.
func checkVersion(t *testing.T, bin, out string) {
	t.Helper()
	re := regexp.MustCompile(`^flecht (\S+)(?: \(([0-9a-f]{1,12})(?:, modified)?(?:, \S+)?\))?\ngo\S+ (\S+)\n$`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("flecht version printed %q, not flecht's version output", out)
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if want := cmp.Or(bi.Main.Version, "(devel)"); m[1] != want {
		t.Errorf("flecht version says version %q, the build info %q", m[1], want)
	}
	var rev string
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			rev = s.Value[:min(len(s.Value), 12)]
		}
	}
	if m[2] != rev {
		t.Errorf("flecht version says revision %q, the build info %q", m[2], rev)
	}
	if want := "linux/" + runtime.GOARCH; m[3] != want {
		t.Errorf("flecht version says platform %q, want %q", m[3], want)
	}
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	return fileSum(t, a) == fileSum(t, b)
}

func fileSum(t *testing.T, p string) [sha256.Size]byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(data)
}

// TestImageReproducible builds flecht a second time and the image from
// each build, without SOURCE_DATE_EPOCH: the same commit gives the same
// bytes, dated by the binary's commit time.
func TestImageReproducible(t *testing.T) {
	flecht, tool := builds(t)
	again := filepath.Join(t.TempDir(), "flecht")
	if err := buildFlecht(again); err != nil {
		t.Fatal(err)
	}
	if !sameFile(t, flecht, again) {
		t.Fatal("two builds of flecht differ: go build is not reproducible here")
	}
	caPath, _ := writeCA(t)
	dir := t.TempDir()
	var sums [2][sha256.Size]byte
	var printed [2]string
	for i, bin := range []string{flecht, again} {
		out := filepath.Join(dir, fmt.Sprintf("image-%d.tar", i))
		p := runTool(t, tool, "", "-binary", bin, "-ca", caPath, "-out", out, "-name", "localhost/flecht:repro")
		printed[i] = strings.TrimPrefix(p, out)
		sums[i] = fileSum(t, out)
	}
	if sums[0] != sums[1] || printed[0] != printed[1] {
		t.Fatalf("two builds differ: %x %q, %x %q", sums[0], printed[0], sums[1], printed[1])
	}

	img, _, _ := readArchive(t, filepath.Join(dir, "image-0.tar"))
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := inspectBinary(flecht)
	if err != nil {
		t.Fatal(err)
	}
	want := bin.vcsTime
	if want.IsZero() {
		want = time.Unix(0, 0) // no VCS stamp (a git worktree): the epoch
	}
	if !cf.Created.Time.Equal(want) {
		t.Errorf("created %s, want %s", cf.Created.Time, want)
	}
}

// TestRunRefuses: bad input is an error naming it, and leaves no archive.
func TestRunRefuses(t *testing.T) {
	dir := t.TempDir()
	caPath, _ := writeCA(t)
	notPEM := filepath.Join(dir, "not.pem")
	notELF := filepath.Join(dir, "not-elf")
	for _, p := range []string{notPEM, notELF} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "out", "image.tar")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no binary", []string{"-out", out, "-name", "flecht:x"}, "-binary is required"},
		{"no out", []string{"-binary", notELF, "-name", "flecht:x"}, "-out is required"},
		{"no name", []string{"-binary", notELF, "-out", out}, "-name is required"},
		{"name without tag", []string{"-binary", notELF, "-out", out, "-name", "registry.example:5000/flecht"}, "has no tag"},
		{"bad name", []string{"-binary", notELF, "-out", out, "-name", "Flecht:x"}, `-name "Flecht:x"`},
		{"arguments", []string{"-binary", notELF, "-out", out, "-name", "flecht:x", "extra"}, "unexpected arguments"},
		{"no CA file", []string{"-binary", notELF, "-out", out, "-name", "flecht:x", "-ca", filepath.Join(dir, "missing")}, "CA certificates"},
		{"CA not PEM", []string{"-binary", notELF, "-out", out, "-name", "flecht:x", "-ca", notPEM}, "holds no PEM certificate"},
		{"not ELF", []string{"-binary", notELF, "-out", out, "-name", "flecht:x", "-ca", caPath}, "not an ELF executable"},
	}
	if dyn := dynamicExecutable(); dyn != "" {
		cases = append(cases, struct {
			name string
			args []string
			want string
		}{"dynamic", []string{"-binary", dyn, "-out", out, "-name", "flecht:x", "-ca", caPath}, "dynamically linked"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := run(tc.args, func(string) string { return "" }, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run(%q) = %v, want an error saying %q", tc.args, err, tc.want)
			}
			if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s exists after a failed build (%v)", out, err)
			}
		})
	}
}

// dynamicExecutable is a dynamically linked executable of this machine,
// or "" when it has none at the usual places.
func dynamicExecutable() string {
	for _, p := range []string{"/bin/sh", "/usr/bin/env", "/bin/true"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		isDynamic := checkStatic(f) != nil
		f.Close()
		if isDynamic {
			return p
		}
	}
	return ""
}

func TestBuildTime(t *testing.T) {
	commit := time.Date(2026, 12, 2, 11, 59, 5, 0, time.UTC)
	for _, tc := range []struct {
		epoch string
		vcs   time.Time
		want  time.Time
	}{
		{"1767225600", commit, time.Unix(1767225600, 0)},
		{"", commit, commit},
		{"", time.Time{}, time.Unix(0, 0)},
	} {
		got, err := buildTime(tc.epoch, tc.vcs)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("buildTime(%q, %s) = %s, %v; want %s", tc.epoch, tc.vcs, got, err, tc.want)
		}
	}
	for _, bad := range []string{"yesterday", "-1", "1e9", "99999999999999"} {
		if _, err := buildTime(bad, commit); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
			t.Errorf("buildTime(%q) = %v, want an error naming SOURCE_DATE_EPOCH", bad, err)
		}
	}
}

func TestIndexAnnotations(t *testing.T) {
	for ref, full := range map[string]bool{
		"localhost/flecht:v1":          true,
		"registry.example/flecht:v1":   true,
		"registry.example:5000/x/y:v1": true,
		"flecht:v1":                    false,
		"team/flecht:v1":               false,
	} {
		a := indexAnnotations(ref)
		if a[refNameAnnotation] != ref {
			t.Errorf("%s: ref.name %q", ref, a[refNameAnnotation])
		}
		if name, ok := a[imageNameAnnotation]; ok != full || ok && name != ref {
			t.Errorf("%s: containerd name %q (%v), want it %v", ref, name, ok, full)
		}
	}
}
