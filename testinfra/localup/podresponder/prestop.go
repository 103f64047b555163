package podresponder

import (
	"path"
	"regexp"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// defaultGracePeriod is the API's default terminationGracePeriodSeconds.
const defaultGracePeriod = 30 * time.Second

// PreStop is how long a deleted pod's process keeps running before the kubelet's SIGTERM ends
// it: the longest preStop hook across its containers, capped by its grace period
// (deletionGracePeriodSeconds once deleted, else terminationGracePeriodSeconds, else 30 s).
// Hooks that count: the sleep action, and exec of `sleep N` run directly or as the first
// command of `sh -c` / `bash -c`. Any other hook (httpGet, another command) counts as instant.
func PreStop(pod *corev1.Pod) time.Duration {
	var longest time.Duration
	for _, c := range pod.Spec.Containers {
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
			continue
		}
		longest = max(longest, hookDuration(c.Lifecycle.PreStop))
	}
	grace := defaultGracePeriod
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return max(0, min(longest, grace))
}

func hookDuration(h *corev1.LifecycleHandler) time.Duration {
	switch {
	case h.Sleep != nil:
		return time.Duration(h.Sleep.Seconds) * time.Second
	case h.Exec != nil:
		return execSleep(h.Exec.Command)
	}
	return 0
}

// shellSleep matches a script whose first command is a sleep: "sleep 5", "exec sleep 5s; …",
// "/bin/sleep 2.5 && nginx -s quit".
var shellSleep = regexp.MustCompile(`^\s*(?:exec\s+)?(?:\S*/)?sleep\s+([0-9]+(?:\.[0-9]+)?)s?\s*(?:$|[;&|\n])`)

func execSleep(cmd []string) time.Duration {
	switch {
	case len(cmd) == 2 && path.Base(cmd[0]) == "sleep":
		return seconds("sleep " + cmd[1])
	case len(cmd) >= 3 && isShell(cmd[0]) && cmd[1] == "-c":
		return seconds(cmd[2])
	}
	return 0
}

func isShell(p string) bool {
	switch path.Base(p) {
	case "sh", "bash", "ash", "dash":
		return true
	}
	return false
}

func seconds(script string) time.Duration {
	m := shellSleep.FindStringSubmatch(script)
	if m == nil {
		return 0
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0
	}
	return time.Duration(f * float64(time.Second))
}
