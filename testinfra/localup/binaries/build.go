package binaries

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BuildOptions configures Build.
type BuildOptions struct {
	// BinDir is the cache root; "" means DefaultBinDir().
	BinDir string
	// Force rebuilds groups that are already in the cache.
	Force bool
	// Go is the go command; "" means "go" from PATH.
	Go string
	// Env is added to the go command's environment (e.g. GOCACHE=… to time a cold build).
	Env []string
	// Progress receives one line per started and finished group; nil discards.
	Progress io.Writer
	// Set names the groups to build: LocalupSet ("" too) or KindSet.
	Set string
}

// GroupResult reports what Build did for one group.
type GroupResult struct {
	Group    string
	Dir      string
	Cached   bool // already built; nothing was done
	Duration time.Duration
}

// Build compiles every group that is not in the cache yet. The groups build concurrently: the
// large Kubernetes+Karmada build leaves a core idle while it links, which etcd and kwok fill.
// Concurrent Build calls for the same group (two make runs) serialise on a lock file.
func Build(ctx context.Context, opts BuildOptions) ([]GroupResult, error) {
	gs, err := setGroups(opts.Set)
	if err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	return build(ctx, opts, root, gs)
}

func build(ctx context.Context, opts BuildOptions, root string, groups []group) (_ []GroupResult, err error) {
	if opts.BinDir == "" {
		if opts.BinDir, err = DefaultBinDir(); err != nil {
			return nil, err
		}
	}
	if opts.Go == "" {
		opts.Go = "go"
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if err := os.MkdirAll(opts.BinDir, 0o755); err != nil {
		return nil, fmt.Errorf("create binary cache: %w", err)
	}
	b := &builder{opts: opts, root: root}

	results := make([]GroupResult, len(groups))
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = b.buildGroup(ctx, g)
		}()
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

type builder struct {
	opts  BuildOptions
	root  string
	outMu sync.Mutex
}

func (b *builder) progress(format string, args ...any) {
	b.outMu.Lock()
	defer b.outMu.Unlock()
	fmt.Fprintf(b.opts.Progress, format+"\n", args...)
}

func (b *builder) buildGroup(ctx context.Context, g group) (GroupResult, error) {
	key, err := g.key(b.root)
	if err != nil {
		return GroupResult{}, err
	}
	name := g.name + "-" + key
	final := filepath.Join(b.opts.BinDir, name)
	res := GroupResult{Group: g.name, Dir: final}

	unlock, err := lockFile(ctx, filepath.Join(b.opts.BinDir, "."+name+".lock"))
	if err != nil {
		return res, fmt.Errorf("build %s: %w", g.name, err)
	}
	defer unlock()

	if _, err := os.Stat(filepath.Join(final, completeMarker)); err == nil && !b.opts.Force {
		res.Cached = true
		return res, nil
	}
	// Leftovers of a build that was killed (its deferred cleanup never ran): with the lock
	// held, nobody else is using them.
	if stale, err := filepath.Glob(filepath.Join(b.opts.BinDir, ".tmp-"+name+"-*")); err == nil {
		for _, d := range stale {
			_ = os.RemoveAll(d)
		}
	}
	start := time.Now()
	b.progress("building %s (%d commands) into %s", g.name, len(g.commands), final)

	tmp, err := os.MkdirTemp(b.opts.BinDir, ".tmp-"+name+"-")
	if err != nil {
		return res, fmt.Errorf("build %s: %w", g.name, err)
	}
	defer os.RemoveAll(tmp) // no-op once renamed

	modDir := filepath.Join(b.root, upstreamDir, g.name)
	mods, err := b.listModules(ctx, modDir)
	if err != nil {
		return res, fmt.Errorf("build %s: %w", g.name, err)
	}
	ldflags := "-s -w"
	if g.k8sVersionStamps {
		stamps, err := versionStamps(mods)
		if err != nil {
			return res, fmt.Errorf("build %s: %w", g.name, err)
		}
		ldflags += " " + stamps
	}
	for _, v := range g.versionVars {
		m, ok := mods[v.module]
		if !ok {
			return res, fmt.Errorf("build %s: %s is not in the module's build list", g.name, v.module)
		}
		version := m.Version
		if v.trimV {
			version = strings.TrimPrefix(version, "v")
		}
		ldflags += " -X " + v.variable + "=" + version
	}

	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags}
	if len(g.tags) > 0 {
		args = append(args, "-tags", strings.Join(g.tags, ","))
	}
	args = append(args, "-o")
	var pkgs []string
	for _, c := range g.commands {
		pkgs = append(pkgs, c.pkg)
	}
	// go build -o <dir>/ writes each main package under its default name; the generic Karmada
	// names ("scheduler", "webhook", …) are renamed below.
	args = append(args, tmp+string(filepath.Separator))
	args = append(args, pkgs...)
	var env []string
	if g.cgo {
		env = append(env, "CGO_ENABLED=1")
	}
	if out, err := b.goCmd(ctx, modDir, env, args...); err != nil {
		return res, fmt.Errorf("build %s: go build: %w\n%s", g.name, err, tail(out, 40))
	}
	for _, c := range g.commands {
		built := filepath.Join(tmp, defaultBinaryName(c.pkg))
		if built != filepath.Join(tmp, c.bin) {
			if err := os.Rename(built, filepath.Join(tmp, c.bin)); err != nil {
				return res, fmt.Errorf("build %s: install %s: %w", g.name, c.bin, err)
			}
		}
	}
	if g.karmadaManifests {
		if err := copyKarmadaManifests(mods, filepath.Join(tmp, KarmadaManifestsDir)); err != nil {
			return res, fmt.Errorf("build %s: %w", g.name, err)
		}
	}
	if err := writeVersions(tmp, mods, g.versionModules); err != nil {
		return res, fmt.Errorf("build %s: %w", g.name, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, completeMarker), []byte(key+"\n"), 0o644); err != nil {
		return res, fmt.Errorf("build %s: %w", g.name, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return res, fmt.Errorf("build %s: %w", g.name, err)
	}
	if err := os.RemoveAll(final); err != nil { // a forced rebuild replaces the old folder
		return res, fmt.Errorf("build %s: replace %s: %w", g.name, final, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return res, fmt.Errorf("build %s: publish: %w", g.name, err)
	}
	res.Duration = time.Since(start)
	b.progress("built %s in %s", g.name, res.Duration.Round(time.Second))
	return res, nil
}

// defaultBinaryName is the file name go build gives a main package: its last path element,
// skipping a major-version suffix (go.etcd.io/etcd/server/v3 -> "server").
func defaultBinaryName(pkg string) string {
	elems := strings.Split(pkg, "/")
	last := elems[len(elems)-1]
	if len(elems) > 1 && majorSuffix.MatchString(last) {
		return elems[len(elems)-2]
	}
	return last
}

var majorSuffix = regexp.MustCompile(`^v[0-9]+$`)

// goCmd runs the go command in dir with a build environment that cannot be changed by the
// caller's workspace or cgo setup, and returns its combined output.
// groupEnv (e.g. CGO_ENABLED=1 for a cgo group) overrides those defaults.
func (b *builder) goCmd(ctx context.Context, dir string, groupEnv []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, b.opts.Go, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=readonly")
	cmd.Env = append(cmd.Env, groupEnv...)
	cmd.Env = append(cmd.Env, b.opts.Env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.Bytes(), err
}

// module is the part of `go list -m -json` output the build uses.
type module struct {
	Path    string
	Version string
	Dir     string
	Replace *module
}

// listModules reports the build list of a scratch module; it also downloads what is missing.
func (b *builder) listModules(ctx context.Context, modDir string) (map[string]module, error) {
	if out, err := b.goCmd(ctx, modDir, nil, "mod", "download"); err != nil {
		return nil, fmt.Errorf("go mod download: %w\n%s", err, tail(out, 20))
	}
	cmd := exec.CommandContext(ctx, b.opts.Go, "list", "-m", "-json", "all")
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	cmd.Env = append(cmd.Env, b.opts.Env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m all: %w\n%s", err, tail(stderr.Bytes(), 20))
	}
	mods := map[string]module{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var m module
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		if m.Replace != nil && m.Replace.Version != "" {
			m.Version, m.Dir = m.Replace.Version, m.Replace.Dir
		}
		mods[m.Path] = m
	}
	return mods, nil
}

// versionStamps returns the -X flags that make the Kubernetes and Karmada binaries report their
// real versions (/version, Karmada's Cluster status) instead of v0.0.0-master.
func versionStamps(mods map[string]module) (string, error) {
	k8s, ok := mods["k8s.io/kubernetes"]
	if !ok {
		return "", errors.New("k8s.io/kubernetes is not in the module's build list")
	}
	karmada, ok := mods["github.com/karmada-io/karmada"]
	if !ok {
		return "", errors.New("github.com/karmada-io/karmada is not in the module's build list")
	}
	var major, minor string
	if parts := strings.SplitN(strings.TrimPrefix(k8s.Version, "v"), ".", 3); len(parts) == 3 {
		major, minor = parts[0], parts[1]
	} else {
		return "", fmt.Errorf("unexpected k8s.io/kubernetes version %q", k8s.Version)
	}
	var flags []string
	for _, p := range []string{"k8s.io/client-go/pkg/version", "k8s.io/component-base/version"} {
		flags = append(flags,
			"-X "+p+".gitVersion="+k8s.Version,
			"-X "+p+".gitMajor="+major,
			"-X "+p+".gitMinor="+minor,
			"-X "+p+".gitTreeState=clean")
	}
	flags = append(flags,
		"-X github.com/karmada-io/karmada/pkg/version.gitVersion="+karmada.Version,
		"-X github.com/karmada-io/karmada/pkg/version.gitTreeState=clean")
	return strings.Join(flags, " "), nil
}

// copyKarmadaManifests copies the CRDs and deploy manifests out of the read-only module cache.
func copyKarmadaManifests(mods map[string]module, dst string) error {
	karmada := mods["github.com/karmada-io/karmada"]
	if karmada.Dir == "" {
		return errors.New("karmada module source not downloaded")
	}
	for _, sub := range []string{"charts/karmada/_crds", "artifacts/deploy"} {
		if err := copyTree(filepath.Join(karmada.Dir, sub), filepath.Join(dst, sub)); err != nil {
			return fmt.Errorf("copy karmada %s: %w", sub, err)
		}
	}
	return nil
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// writeVersions records the module versions a group was built from, for people and bug reports.
func writeVersions(dir string, mods map[string]module, paths []string) error {
	var lines []string
	for _, p := range paths {
		if m, ok := mods[p]; ok {
			lines = append(lines, p+" "+m.Version)
		}
	}
	return os.WriteFile(filepath.Join(dir, "versions.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// lockFile takes an exclusive flock on path, polling so that ctx can cancel the wait.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
