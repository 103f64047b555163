// Package binaries builds and locates the upstream programs that testinfra/localup runs: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, every Karmada component and
// kwok. Nothing is downloaded as a binary: each group is compiled from a scratch Go module under
// e2e/upstream/<group>, whose committed go.mod/go.sum are the only place versions are pinned.
//
// Built groups live in a cache outside the repository, one folder per group and key:
//
//	$LBFED_BIN_DIR (default $HOME/.cache/lbfed/bin)/
//	  kube-karmada-<key>/  kube-apiserver kubectl karmada-webhook karmada-agent … karmada-manifests/
//	  etcd-<key>/          etcd
//	  kwok-<key>/          kwok
//
// The key hashes the group's module files and build recipe, so changing a pinned version selects
// a new folder and the old one is simply no longer used. A folder is published by an atomic
// rename once complete, so an interrupted build is never mistaken for a finished one.
//
// Build from the repository with `go run ./testinfra/localup/cmd/localup build` (or `make tools`); from
// Go, Locate finds a built set:
//
//	set, err := binaries.Locate("")
//	if err != nil { … }          // errors.Is(err, binaries.ErrNotBuilt) when a build is missing
//	apiserver := set.Path(binaries.KubeAPIServer)
package binaries

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Names of the binaries, as found in a Set.
const (
	Etcd                       = "etcd"
	KubeAPIServer              = "kube-apiserver"
	KubeControllerManager      = "kube-controller-manager"
	KubeScheduler              = "kube-scheduler"
	Kubectl                    = "kubectl"
	KarmadaControllerManager   = "karmada-controller-manager"
	KarmadaScheduler           = "karmada-scheduler"
	KarmadaWebhook             = "karmada-webhook"
	KarmadaAggregatedAPIServer = "karmada-aggregated-apiserver"
	KarmadaAgent               = "karmada-agent"
	Karmadactl                 = "karmadactl"
	Kwok                       = "kwok"

	// The kind node's programs (KindSet): built for hack/kind's node and component images.
	Kubelet              = "kubelet"
	Kubeadm              = "kubeadm"
	KubeProxy            = "kube-proxy"
	Containerd           = "containerd"
	ContainerdShimRuncV2 = "containerd-shim-runc-v2"
	Ctr                  = "ctr"
	Runc                 = "runc"
	Crictl               = "crictl"
	Coredns              = "coredns"
	CNIPtp               = "ptp"
	CNIHostLocal         = "host-local"
	CNILoopback          = "loopback"
	CNIPortmap           = "portmap"
)

// KarmadaManifestsDir is the folder, inside the kube-karmada group, holding Karmada's
// charts/karmada/_crds and artifacts/deploy copied from the pinned Karmada module at build time,
// so that starting Karmada needs neither the go tool nor the module cache.
const KarmadaManifestsDir = "karmada-manifests"

// recipeVersion is part of every key: bump it when the way binaries are built changes (flags,
// layout) so existing caches are rebuilt rather than reused.
const recipeVersion = "lbfed-binaries/1"

// command is one main package of a group and the file name it is installed under.
type command struct {
	pkg string
	bin string
}

// group is one scratch module under e2e/upstream and the commands built from it in one go build.
type group struct {
	name     string
	commands []command
	// k8sVersionStamps adds the -X flags without which Kubernetes and Karmada report v0.0.0-master.
	k8sVersionStamps bool
	// karmadaManifests copies Karmada's CRDs and deploy manifests into the built folder.
	karmadaManifests bool
	// versionModules are recorded in the folder's versions.txt.
	versionModules []string
	// cgo builds with CGO_ENABLED=1 (runc's nsenter and libseccomp); every other group is static.
	cgo bool
	// tags are the go build tags.
	tags []string
	// versionVars stamp a module's version into a string variable (-X), for the programs that
	// report it and have no Kubernetes-style stamps.
	versionVars []versionVar
}

// versionVar is one -X stamp: variable gets the build-list version of module, without its
// leading "v" when trimV is set.
type versionVar struct {
	variable, module string
	trimV            bool
}

var groups = []group{
	{
		name: "kube-karmada",
		commands: []command{
			{"k8s.io/kubernetes/cmd/kube-apiserver", KubeAPIServer},
			{"k8s.io/kubernetes/cmd/kube-controller-manager", KubeControllerManager},
			{"k8s.io/kubernetes/cmd/kube-scheduler", KubeScheduler},
			{"k8s.io/kubernetes/cmd/kubectl", Kubectl},
			{"github.com/karmada-io/karmada/cmd/controller-manager", KarmadaControllerManager},
			{"github.com/karmada-io/karmada/cmd/scheduler", KarmadaScheduler},
			{"github.com/karmada-io/karmada/cmd/webhook", KarmadaWebhook},
			{"github.com/karmada-io/karmada/cmd/aggregated-apiserver", KarmadaAggregatedAPIServer},
			// Pull-mode members (localup.TopologyOptions.PullMembers).
			{"github.com/karmada-io/karmada/cmd/agent", KarmadaAgent},
			{"github.com/karmada-io/karmada/cmd/karmadactl", Karmadactl},
		},
		k8sVersionStamps: true,
		karmadaManifests: true,
		versionModules:   []string{"k8s.io/kubernetes", "github.com/karmada-io/karmada"},
	},
	{name: "etcd", commands: []command{{"go.etcd.io/etcd/server/v3", Etcd}}, versionModules: []string{"go.etcd.io/etcd/server/v3"}},
	{name: "kwok", commands: []command{{"sigs.k8s.io/kwok/cmd/kwok", Kwok}}, versionModules: []string{"sigs.k8s.io/kwok"}},
}

// kindGroups are the groups of KindSet besides kube-karmada (shared with the localup set, same
// folder): what a kind node and the images of hack/kind need. They are not built by `make
// tools`, only by `localup build --set=kind` (hack/kind), so CI's existing jobs do not pay for them.
var kindGroups = []group{
	{
		// Same module files as kube-karmada plus three tools, so that the build list is the same
		// and the shared Kubernetes packages come from the Go build cache.
		name: "kube-node",
		commands: []command{
			{"k8s.io/kubernetes/cmd/kubelet", Kubelet},
			{"k8s.io/kubernetes/cmd/kubeadm", Kubeadm},
			{"k8s.io/kubernetes/cmd/kube-proxy", KubeProxy},
		},
		k8sVersionStamps: true,
		versionModules:   []string{"k8s.io/kubernetes"},
	},
	{
		name: "containerd",
		commands: []command{
			{"github.com/containerd/containerd/v2/cmd/containerd", Containerd},
			{"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2", ContainerdShimRuncV2},
			{"github.com/containerd/containerd/v2/cmd/ctr", Ctr},
		},
		tags: []string{"no_btrfs", "no_devmapper", "no_zfs"},
		versionVars: []versionVar{
			{variable: "github.com/containerd/containerd/v2/version.Version", module: "github.com/containerd/containerd/v2"},
		},
		versionModules: []string{"github.com/containerd/containerd/v2"},
	},
	{
		name:           "runc",
		commands:       []command{{"github.com/opencontainers/runc", Runc}},
		cgo:            true,
		tags:           []string{"seccomp", "urfave_cli_no_docs"},
		versionVars:    []versionVar{{variable: "main.version", module: "github.com/opencontainers/runc", trimV: true}},
		versionModules: []string{"github.com/opencontainers/runc"},
	},
	{
		name: "cni-plugins",
		commands: []command{
			{"github.com/containernetworking/plugins/plugins/main/ptp", CNIPtp},
			{"github.com/containernetworking/plugins/plugins/ipam/host-local", CNIHostLocal},
			{"github.com/containernetworking/plugins/plugins/main/loopback", CNILoopback},
			{"github.com/containernetworking/plugins/plugins/meta/portmap", CNIPortmap},
		},
		versionVars: []versionVar{
			{variable: "github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion", module: "github.com/containernetworking/plugins"},
		},
		versionModules: []string{"github.com/containernetworking/plugins"},
	},
	{
		name:           "crictl",
		commands:       []command{{"sigs.k8s.io/cri-tools/cmd/crictl", Crictl}},
		versionVars:    []versionVar{{variable: "sigs.k8s.io/cri-tools/pkg/version.Version", module: "sigs.k8s.io/cri-tools"}},
		versionModules: []string{"sigs.k8s.io/cri-tools"},
	},
	{
		name:           "coredns",
		commands:       []command{{"github.com/coredns/coredns", Coredns}},
		versionModules: []string{"github.com/coredns/coredns"},
	},
	{
		// kubeadm v1.35's etcd (registry.k8s.io/etcd:3.6.6-0); the localup set keeps its own.
		name:           "etcd-node",
		commands:       []command{{"go.etcd.io/etcd/server/v3", Etcd}},
		versionModules: []string{"go.etcd.io/etcd/server/v3"},
	},
}

// Names of the sets of groups that Locate and Build take.
const (
	// LocalupSet is what testinfra/localup runs: etcd, Kubernetes' control plane, Karmada, kwok.
	LocalupSet = "localup"
	// KindSet is what hack/kind builds its node and component images from: kube-karmada
	// (control plane, kubectl, Karmada) and kindGroups.
	KindSet = "kind"
)

// setGroups returns the groups of a named set ("" is LocalupSet).
func setGroups(name string) ([]group, error) {
	switch name {
	case "", LocalupSet:
		return groups, nil
	case KindSet:
		return append([]group{groups[0]}, kindGroups...), nil
	}
	return nil, fmt.Errorf("unknown binary set %q (want %s or %s)", name, LocalupSet, KindSet)
}

// ErrNotBuilt reports that a group of binaries is not in the cache for the current pins.
var ErrNotBuilt = errors.New("binaries not built")

// EnvBinDir overrides the cache root; EnvRepoRoot overrides where e2e/upstream is looked for.
const (
	EnvBinDir   = "LBFED_BIN_DIR"
	EnvRepoRoot = "LBFED_REPO_ROOT"
)

// upstreamDir is where the scratch modules live, relative to the repository root.
const upstreamDir = "e2e/upstream"

// DefaultBinDir is the cache root: $LBFED_BIN_DIR, else $HOME/.cache/lbfed/bin.
func DefaultBinDir() (string, error) {
	if d := os.Getenv(EnvBinDir); d != "" {
		return filepath.Abs(d)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("locate binary cache: %w (set %s)", err, EnvBinDir)
	}
	return filepath.Join(home, ".cache", "lbfed", "bin"), nil
}

// RepoRoot finds the lbfed checkout: $LBFED_REPO_ROOT, else the nearest parent of the working
// directory that holds e2e/upstream. Tests run inside the repository, so the walk always succeeds
// there.
func RepoRoot() (string, error) {
	if d := os.Getenv(EnvRepoRoot); d != "" {
		return filepath.Abs(d)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		if fi, err := os.Stat(filepath.Join(dir, upstreamDir)); err == nil && fi.IsDir() {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find repository root: no %s above the working directory (set %s)", upstreamDir, EnvRepoRoot)
		}
		dir = parent
	}
}

// key hashes everything that determines a group's output: its module files, commands and the
// recipe version. The Go toolchain version is deliberately left out: binaries built by any Go
// that accepts the module's go line behave the same, and a Go upgrade should not cost a
// ten-minute rebuild.
func (g group) key(repoRoot string) (string, error) {
	modDir := filepath.Join(repoRoot, upstreamDir, g.name)
	var files []string
	err := filepath.WalkDir(modDir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (d.Name() == "go.mod" || d.Name() == "go.sum") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash module %s: %w", g.name, err)
	}
	if len(files) == 0 {
		return "", fmt.Errorf("hash module %s: no go.mod under %s", g.name, modDir)
	}
	sort.Strings(files)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", recipeVersion, g.name)
	for _, c := range g.commands {
		fmt.Fprintf(h, "cmd %s %s\n", c.pkg, c.bin)
	}
	fmt.Fprintf(h, "stamps=%t manifests=%t\n", g.k8sVersionStamps, g.karmadaManifests)
	// Written only when set, so the keys of the groups that have none stay what they were.
	if g.cgo {
		fmt.Fprintf(h, "cgo\n")
	}
	if len(g.tags) > 0 {
		fmt.Fprintf(h, "tags %s\n", strings.Join(g.tags, ","))
	}
	for _, v := range g.versionVars {
		fmt.Fprintf(h, "var %s %s %t\n", v.variable, v.module, v.trimV)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("hash module %s: %w", g.name, err)
		}
		rel, _ := filepath.Rel(modDir, f)
		fmt.Fprintf(h, "file %s %d\n", filepath.ToSlash(rel), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// Set is a located, complete set of binaries.
type Set struct {
	dirs map[string]string // binary name -> folder
	// KarmadaManifests is the folder with Karmada's charts/karmada/_crds and artifacts/deploy.
	KarmadaManifests string
}

// Path returns the absolute path of the named binary (one of the constants above).
func (s *Set) Path(name string) string {
	return filepath.Join(s.dirs[name], name)
}

// Dirs returns every folder of the set, e.g. to put them on PATH.
func (s *Set) Dirs() []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range s.dirs {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// Locate finds the binaries for the current pins under binDir ("" = DefaultBinDir). It fails
// with an error wrapping ErrNotBuilt, naming every missing group, when a build is needed.
func Locate(binDir string) (*Set, error) {
	return LocateSet(binDir, LocalupSet)
}

// LocateSet is Locate for a named set of groups (LocalupSet or KindSet).
func LocateSet(binDir, set string) (*Set, error) {
	gs, err := setGroups(set)
	if err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	return locate(binDir, root, gs)
}

func locate(binDir, root string, groups []group) (_ *Set, err error) {
	if binDir == "" {
		if binDir, err = DefaultBinDir(); err != nil {
			return nil, err
		}
	}
	set := &Set{dirs: map[string]string{}}
	var missing []string
	for _, g := range groups {
		key, err := g.key(root)
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(binDir, g.name+"-"+key)
		if _, err := os.Stat(filepath.Join(dir, completeMarker)); err != nil {
			missing = append(missing, g.name+"-"+key)
			continue
		}
		for _, c := range g.commands {
			set.dirs[c.bin] = dir
		}
		if g.karmadaManifests {
			set.KarmadaManifests = filepath.Join(dir, KarmadaManifestsDir)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s missing in %s; run `make tools` (or `go run ./testinfra/localup/cmd/localup build`, with --set=kind for the kind set)",
			ErrNotBuilt, strings.Join(missing, ", "), binDir)
	}
	return set, nil
}

// completeMarker is written last into a group's folder before it is published.
const completeMarker = ".complete"
