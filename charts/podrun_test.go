package charts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// podRunner plays the kubelet for the charts' one-shot pods (the apply Jobs, helm test) in the
// integration tests, where no kubelet runs: it runs each container's image as a local binary with
// the container's arguments, init containers first and in order, stopping at the first failure,
// with the pod's volumes as folders. The pod's own paths are rewritten to those folders
// wherever they appear in arguments and environment values, and the pod's ServiceAccount
// credentials (the kubelet's mount, or a projected token) become a kubeconfig that impersonates
// it, so the pod's kubectl calls get exactly the RBAC the chart grants.
type podRunner struct {
	// bins maps an image's name (its last path element, without tag) to a local binary.
	bins map[string]string
	// secrets and configMaps are the objects the pod's volumes name: name → key → data.
	secrets, configMaps map[string]map[string][]byte
	// inCluster returns a kubeconfig acting as the ServiceAccount, for kubectl's in-cluster
	// configuration.
	inCluster func(namespace, serviceAccount string) (string, error)
}

// containerRun is what one container did.
type containerRun struct {
	name   string
	exit   int
	output string
}

// tokenMountPath is where the kubelet mounts a ServiceAccount's credentials.
const tokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// run runs pod's containers in namespace and returns what each that ran did; err is set when the
// pod could not start (a missing Secret or ConfigMap, an image without a binary).
func (r *podRunner) run(ctx context.Context, t testing.TB, namespace string, pod corev1.PodSpec) ([]containerRun, error) {
	t.Helper()
	// Not t.TempDir: a subtest's name may hold a comma, which kubectl -f reads as a list.
	dir, err := os.MkdirTemp("", "lbfed-pod-")
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	volumes := map[string]string{} // volume name → folder
	tokenVolumes := map[string]bool{}
	for _, v := range pod.Volumes {
		vdir := filepath.Join(dir, "volumes", v.Name)
		if err := os.MkdirAll(vdir, 0o700); err != nil {
			return nil, err
		}
		volumes[v.Name] = vdir
		var data map[string][]byte
		var items []corev1.KeyToPath
		switch {
		case v.Secret != nil:
			d, ok := r.secrets[v.Secret.SecretName]
			if !ok && (v.Secret.Optional == nil || !*v.Secret.Optional) {
				return nil, fmt.Errorf("volume %s: Secret %s not found", v.Name, v.Secret.SecretName)
			}
			data, items = d, v.Secret.Items
		case v.ConfigMap != nil:
			d, ok := r.configMaps[v.ConfigMap.Name]
			if !ok {
				return nil, fmt.Errorf("volume %s: ConfigMap %s not found", v.Name, v.ConfigMap.Name)
			}
			data, items = d, v.ConfigMap.Items
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					tokenVolumes[v.Name] = true
				}
			}
			continue
		case v.EmptyDir != nil:
			continue
		default:
			return nil, fmt.Errorf("volume %s: kind not supported by the pod runner", v.Name)
		}
		if items == nil {
			for k := range data {
				items = append(items, corev1.KeyToPath{Key: k, Path: k})
			}
		}
		for _, it := range items {
			b, ok := data[it.Key]
			if !ok {
				return nil, fmt.Errorf("volume %s: no key %s", v.Name, it.Key)
			}
			if err := os.WriteFile(filepath.Join(vdir, it.Path), b, 0o600); err != nil {
				return nil, err
			}
		}
	}
	sa := pod.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	automount := pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken

	var runs []containerRun
	for _, c := range append(append([]corev1.Container(nil), pod.InitContainers...), pod.Containers...) {
		image := path.Base(c.Image)
		image, _, _ = strings.Cut(image, ":")
		bin, ok := r.bins[image]
		if !ok {
			return runs, fmt.Errorf("container %s: no binary for image %s", c.Name, c.Image)
		}
		mounts := map[string]string{} // mount path → folder
		inCluster := automount
		for _, m := range c.VolumeMounts {
			if tokenVolumes[m.Name] {
				if m.MountPath != tokenMountPath {
					return runs, fmt.Errorf("container %s: ServiceAccount token mounted at %s, not where kubectl looks", c.Name, m.MountPath)
				}
				inCluster = true
				continue
			}
			f, ok := volumes[m.Name]
			if !ok {
				return runs, fmt.Errorf("container %s: mount of unknown volume %s", c.Name, m.Name)
			}
			mounts[m.MountPath] = f
		}
		local := localPaths(mounts)
		// A clean environment: nothing of the test process leaks into the pod.
		env := []string{"PATH=/usr/bin:/bin"}
		hasKubeconfig := false
		for _, e := range c.Env {
			env = append(env, e.Name+"="+local(e.Value))
			hasKubeconfig = hasKubeconfig || e.Name == "KUBECONFIG"
		}
		if inCluster && !hasKubeconfig {
			kc, err := r.inCluster(namespace, sa)
			if err != nil {
				return runs, err
			}
			env = append(env, "KUBECONFIG="+kc)
		}
		var args []string
		for _, a := range append(append([]string(nil), c.Command...), c.Args...) {
			args = append(args, local(a))
		}
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		run := containerRun{name: c.Name, output: out.String()}
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			run.exit = exit.ExitCode()
		case err != nil:
			return runs, fmt.Errorf("container %s: %w", c.Name, err)
		}
		runs = append(runs, run)
		if run.exit != 0 {
			break
		}
	}
	return runs, nil
}

// localPaths returns a function replacing the pod's mount paths in s by their folders.
func localPaths(mounts map[string]string) func(string) string {
	var paths []string
	for p := range mounts {
		paths = append(paths, p)
	}
	// Longest first: /etc/a/b before /etc/a.
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	return func(s string) string {
		for _, p := range paths {
			switch {
			case s == p:
				return mounts[p]
			case strings.HasSuffix(s, "="+p):
				return strings.TrimSuffix(s, p) + mounts[p]
			case strings.Contains(s, p+"/"):
				return strings.Replace(s, p+"/", mounts[p]+"/", 1)
			}
		}
		return s
	}
}

// succeeded reports whether every container of the pod ran and exited 0.
func succeeded(pod corev1.PodSpec, runs []containerRun) bool {
	if len(runs) != len(pod.InitContainers)+len(pod.Containers) {
		return false
	}
	for _, r := range runs {
		if r.exit != 0 {
			return false
		}
	}
	return true
}

// describeRuns is runs as text, for failure messages.
func describeRuns(runs []containerRun) string {
	var b strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&b, "--- %s (exit %d)\n%s\n", r.name, r.exit, strings.TrimSpace(r.output))
	}
	return b.String()
}
