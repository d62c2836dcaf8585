package main

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// binaryInfo is what the image takes from the binary itself, so that the
// platform it declares is the one the binary was built for.
type binaryInfo struct {
	platform v1.Platform
	version  string    // the main module's version in the build info
	revision string    // vcs.revision, "" when the build did not stamp it
	vcsTime  time.Time // vcs.time (the commit's time), zero when not stamped
}

// elfMachines is the ELF machine of a binary for each GOARCH the image
// supports (OCI names architectures as GOARCH does).
var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"arm":     elf.EM_ARM,
	"386":     elf.EM_386,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
	"loong64": elf.EM_LOONGARCH,
}

// inspectBinary checks that path is a static Linux Go executable (the
// image has no libc and no dynamic loader) and reads its platform and
// version from its build info.
func inspectBinary(path string) (binaryInfo, error) {
	f, err := elf.Open(path)
	if err != nil {
		return binaryInfo{}, fmt.Errorf("%s: not an ELF executable: %w", path, err)
	}
	defer f.Close()
	if err := checkStatic(f); err != nil {
		return binaryInfo{}, fmt.Errorf("%s: %w", path, err)
	}
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return binaryInfo{}, fmt.Errorf("%s: no Go build info: %w", path, err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	goos, goarch := settings["GOOS"], settings["GOARCH"]
	if goos != "linux" {
		return binaryInfo{}, fmt.Errorf("%s: built for GOOS=%q, the image runs Linux: build it with GOOS=linux", path, goos)
	}
	machine, ok := elfMachines[goarch]
	if !ok {
		return binaryInfo{}, fmt.Errorf("%s: GOARCH=%q is not one the image supports", path, goarch)
	}
	if f.Machine != machine {
		return binaryInfo{}, fmt.Errorf("%s: ELF machine %s does not match its GOARCH=%s", path, f.Machine, goarch)
	}
	info := binaryInfo{
		platform: v1.Platform{OS: "linux", Architecture: goarch},
		version:  bi.Main.Version,
		revision: settings["vcs.revision"],
	}
	// GOARM is "7" or "7,softfloat"; OCI's variant for it is "v7".
	if goarm := settings["GOARM"]; goarch == "arm" && goarm != "" {
		info.platform.Variant = "v" + goarm[:1]
	}
	if s := settings["vcs.time"]; s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return binaryInfo{}, fmt.Errorf("%s: build info vcs.time %q: %w", path, s, err)
		}
		info.vcsTime = t.UTC()
	}
	return info, nil
}

// checkStatic refuses an executable that needs a dynamic loader or shared
// libraries: neither is in the image.
func checkStatic(f *elf.File) error {
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("ELF type %s is not an executable", f.Type)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		interp, _ := io.ReadAll(io.LimitReader(p.Open(), 256))
		return fmt.Errorf("dynamically linked (interpreter %q): build it with CGO_ENABLED=0", bytes.TrimRight(interp, "\x00"))
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("reading its dynamic section: %w", err)
	}
	if len(libs) > 0 {
		return fmt.Errorf("needs shared libraries %v: build it with CGO_ENABLED=0", libs)
	}
	return nil
}
