package bfe

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/lbfed/lbfed/elb/bfe/bfeconf"
)

// Store keeps versioned configuration directories under one data directory:
//
//	<dir>/v00000042/server_data_conf/*.data   complete file set of version 42
//	<dir>/v00000042/cluster_conf/*.data
//	<dir>/v00000042/state.json                the model and versions the files were generated from
//	<dir>/v00000042/steps/<name>/cluster_conf intermediate GSLB data used during a reload sequence
//	<dir>/current -> v00000042                the last version BFE accepted
//
// bfe.conf names the files through the link (see BFEConfServerSection), so a restarted BFE loads
// the last good version. A version directory is complete before it gets its name (written under a
// temporary name, synced, then renamed), and the link is replaced by rename only after BFE accepted
// the version.
type Store struct {
	dir string
}

const (
	currentLink   = "current"
	stateFile     = "state.json"
	versionPrefix = "v"
	stepsDir      = "steps"
)

// OpenStore opens (creating it if needed) a store in dir, which must be an absolute path: BFE
// resolves relative reload paths against its own working directory.
func OpenStore(dir string) (*Store, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("store directory %q must be absolute", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create store directory: %w", err)
	}
	return &Store{dir: dir}, nil
}

// Dir is the store's data directory.
func (s *Store) Dir() string { return s.dir }

// VersionDir is the directory of version v.
func (s *Store) VersionDir(v uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%s%08d", versionPrefix, v))
}

// StepDir is the directory of an intermediate file set written for version v.
func (s *Store) StepDir(v uint64, step string) string {
	return filepath.Join(s.VersionDir(v), stepsDir, step)
}

// State is what a version directory records about its origin.
type State struct {
	Version  uint64   `json:"version"`
	Versions Versions `json:"versions"`
	Model    *Model   `json:"model"`
}

// Snapshot is a version as read back from disk.
type Snapshot struct {
	State
	Files bfeconf.Files
}

// Current reads the version the current link points to; nil when there is none yet.
func (s *Store) Current() (*Snapshot, error) {
	target, err := os.Readlink(filepath.Join(s.dir, currentLink))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read current link: %w", err)
	}
	v, ok := parseVersionDir(filepath.Base(target))
	if !ok {
		return nil, fmt.Errorf("current link points to %q, not a version directory", target)
	}
	return s.Read(v)
}

// Read loads version v.
func (s *Store) Read(v uint64) (*Snapshot, error) {
	dir := s.VersionDir(v)
	snap := &Snapshot{Files: bfeconf.Files{}}
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("read version %d: %w", v, err)
	}
	if err := json.Unmarshal(b, &snap.State); err != nil {
		return nil, fmt.Errorf("decode %s of version %d: %w", stateFile, v, err)
	}
	if snap.Model == nil {
		snap.Model = NewModel()
	}
	for _, rel := range []string{bfeconf.HostRulePath, bfeconf.VipRulePath, bfeconf.RouteRulePath, bfeconf.ClusterConfPath,
		bfeconf.NameConfPath, bfeconf.ClusterTablePath, bfeconf.GslbPath} {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			return nil, fmt.Errorf("read version %d: %w", v, err)
		}
		snap.Files[rel] = b
	}
	return snap, nil
}

// LatestVersion returns the highest version number present (0 when none), so new versions never
// reuse a number BFE may have seen.
func (s *Store) LatestVersion() (uint64, error) {
	versions, err := s.versions()
	if err != nil || len(versions) == 0 {
		return 0, err
	}
	return versions[len(versions)-1], nil
}

func (s *Store) versions() ([]uint64, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list store: %w", err)
	}
	var out []uint64
	for _, e := range entries {
		if v, ok := parseVersionDir(e.Name()); ok && e.IsDir() {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

func parseVersionDir(name string) (uint64, bool) {
	if !strings.HasPrefix(name, versionPrefix) || len(name) < 2 {
		return 0, false
	}
	v, err := strconv.ParseUint(name[len(versionPrefix):], 10, 64)
	return v, err == nil && v > 0
}

// WriteVersion writes a complete version directory atomically: every file is written and synced
// under a temporary directory, which is then renamed to its final name. steps are extra file sets
// (relative paths under the version's steps/<name>/) written with it.
func (s *Store) WriteVersion(st State, files bfeconf.Files, steps map[string]bfeconf.Files) error {
	final := s.VersionDir(st.Version)
	if _, err := os.Stat(final); err == nil {
		return fmt.Errorf("version %d already exists", st.Version)
	}
	tmp, err := os.MkdirTemp(s.dir, ".tmp-")
	if err != nil {
		return fmt.Errorf("create temporary version directory: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(tmp)
		}
	}()
	state, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	all := map[string][]byte{stateFile: state}
	for rel, b := range files {
		all[rel] = b
	}
	for name, set := range steps {
		for rel, b := range set {
			all[filepath.Join(stepsDir, name, rel)] = b
		}
	}
	dirs := map[string]struct{}{}
	for rel, b := range all {
		p := filepath.Join(tmp, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("write version %d: %w", st.Version, err)
		}
		dirs[filepath.Dir(p)] = struct{}{}
		if err := writeSynced(p, b); err != nil {
			return fmt.Errorf("write version %d: %w", st.Version, err)
		}
	}
	for d := range dirs {
		if err := syncDir(d); err != nil {
			return fmt.Errorf("write version %d: %w", st.Version, err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("write version %d: %w", st.Version, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("write version %d: %w", st.Version, err)
	}
	ok = true
	return syncDir(s.dir)
}

// WriteState replaces the state file of an existing version; used when the model changed without
// changing any BFE file (e.g. a LoadBalancer without backends was added).
func (s *Store) WriteState(st State) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	dir := s.VersionDir(st.Version)
	tmp := filepath.Join(dir, "."+stateFile+".tmp")
	if err := writeSynced(tmp, b); err != nil {
		return fmt.Errorf("write state of version %d: %w", st.Version, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, stateFile)); err != nil {
		return fmt.Errorf("write state of version %d: %w", st.Version, err)
	}
	return syncDir(dir)
}

// SetCurrent atomically points the current link at version v.
func (s *Store) SetCurrent(v uint64) error {
	tmp := filepath.Join(s.dir, ".current.tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(s.VersionDir(v)), tmp); err != nil {
		return fmt.Errorf("set current version %d: %w", v, err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, currentLink)); err != nil {
		return fmt.Errorf("set current version %d: %w", v, err)
	}
	return syncDir(s.dir)
}

// GC removes version directories older than the newest keep versions, never the current one, and
// leftovers of interrupted writes.
func (s *Store) GC(keep int) error {
	cur := uint64(0)
	if target, err := os.Readlink(filepath.Join(s.dir, currentLink)); err == nil {
		cur, _ = parseVersionDir(filepath.Base(target))
	}
	versions, err := s.versions()
	if err != nil {
		return err
	}
	var errs []error
	for i, v := range versions {
		if v == cur || i >= len(versions)-keep {
			continue
		}
		if err := os.RemoveAll(s.VersionDir(v)); err != nil {
			errs = append(errs, err)
		}
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("garbage-collect versions: %w", err)
	}
	return nil
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// BFEConfServerSection returns the [Server] lines of bfe.conf that point BFE at the store's current
// version. linkDir is the store directory as BFE should see it: relative to BFE's configuration root
// or absolute.
func BFEConfServerSection(linkDir string) string {
	p := func(rel string) string { return filepath.ToSlash(filepath.Join(linkDir, currentLink, rel)) }
	return "HostRuleConf = " + p(bfeconf.HostRulePath) + "\n" +
		"VipRuleConf = " + p(bfeconf.VipRulePath) + "\n" +
		"RouteRuleConf = " + p(bfeconf.RouteRulePath) + "\n" +
		"ClusterConf = " + p(bfeconf.ClusterConfPath) + "\n" +
		"NameConf = " + p(bfeconf.NameConfPath) + "\n" +
		"ClusterTableConf = " + p(bfeconf.ClusterTablePath) + "\n" +
		"GslbConf = " + p(bfeconf.GslbPath) + "\n"
}
