package localup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
)

// Tier orders teardown: every process of a lower tier is stopped before any of a higher one, so
// that clients never watch a vanished apiserver and apiservers never lose etcd while serving.
type Tier int

const (
	// TierClient: controllers, schedulers, kwok, webhooks and any process a test adds.
	TierClient Tier = iota
	// TierAggregated: aggregated apiservers, which call back into their host apiserver.
	TierAggregated
	// TierAPIServer: kube-apiservers.
	TierAPIServer
	// TierStorage: etcd.
	TierStorage
)

// ProcessSpec describes a process to start.
type ProcessSpec struct {
	// Name identifies the process in logs and errors; its output goes to <logs>/<Name>.log.
	Name string
	Path string
	Args []string
	// Env is appended to the parent's environment (KUBECONFIG removed, so no process ever
	// talks to a cluster it was not explicitly pointed at).
	Env []string
	// Dir is the working directory; "" keeps the parent's.
	Dir  string
	Tier Tier
	// NetNS runs the process inside this network namespace (`ip netns exec`, which execs the
	// command in place: the PID, signals and PR_SET_PDEATHSIG stay the command's own), e.g.
	// Cluster.NetNS() for a process that must keep reaching a cluster whose Link is cut.
	NetNS string
}

// Process is a started child process.
type Process struct {
	Name    string
	Path    string
	LogPath string
	Tier    Tier

	spec    ProcessSpec // to start it again (Topology.Restart)
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	oneShot bool        // started by run: exiting is its job
	stopped atomic.Bool // signalled by stop: exiting is expected
	// replaced: the process exited on its own and its owner started another in its place (as a
	// Deployment restarts a pod): its exit is not reported by CheckProcesses.
	replaced atomic.Bool
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited and, if so, how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// StopRequested reports whether the run stopped the process (its exit was expected).
func (p *Process) StopRequested() bool { return p.stopped.Load() }

// MarkReplaced records that p exited on its own and another process took its place.
func (p *Process) MarkReplaced() { p.replaced.Store(true) }

// Replaced reports whether another process took p's place.
func (p *Process) Replaced() bool { return p.replaced.Load() }

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return lastLines(b, n)
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// exitError describes a process that exited when it should not have.
func (p *Process) exitError() error {
	_, err := p.Exited()
	if err == nil {
		err = errors.New("exit status 0")
	}
	return fmt.Errorf("%s (pid %d) exited: %w; last lines of %s:\n%s", p.Name, p.PID(), err, p.LogPath, p.LogTail(25))
}

// supervisor starts processes and stops them in tier order. Children get PR_SET_PDEATHSIG, so
// they die with the process that started them even when it is killed with SIGKILL: a test binary
// killed by `go test -timeout` or a crashed `localup` leaves nothing behind.
type supervisor struct {
	logDir      string
	log         logr.Logger
	stopTimeout time.Duration

	mu      sync.Mutex
	procs   []*Process
	closed  bool
	onStops []func() // in-process components (responders), run before any process is signalled
}

func newSupervisor(logDir string, log logr.Logger) (*supervisor, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	return &supervisor{logDir: logDir, log: log, stopTimeout: 15 * time.Second}, nil
}

// start starts spec in the background.
func (s *supervisor) start(spec ProcessSpec) (*Process, error) {
	return s.startProcess(spec, false)
}

func (s *supervisor) startProcess(spec ProcessSpec, oneShot bool) (*Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("start %s: run is stopping", spec.Name)
	}
	p, err := s.spawn(spec)
	if err != nil {
		return nil, err
	}
	p.oneShot = oneShot
	s.procs = append(s.procs, p)
	s.log.V(1).Info("started", "process", spec.Name, "pid", p.PID(), "log", p.LogPath)
	return p, nil
}

// run starts spec and waits for it to exit; ctx cancellation kills it. Its output is logged like
// any other process's and returned in the error when it fails.
func (s *supervisor) run(ctx context.Context, spec ProcessSpec) error {
	p, err := s.startProcess(spec, true)
	if err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s: %w", spec.Name, ctx.Err())
	}
	if p.waitErr != nil {
		return p.exitError()
	}
	return nil
}

func (s *supervisor) spawn(spec ProcessSpec) (*Process, error) {
	logPath := filepath.Join(s.logDir, spec.Name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	defer logFile.Close() // the child holds its own descriptor
	fmt.Fprintf(logFile, "=== %s %s %s\n", time.Now().Format(time.RFC3339), spec.Path, strings.Join(spec.Args, " "))
	if spec.NetNS != "" {
		fmt.Fprintf(logFile, "=== in network namespace %s\n", spec.NetNS)
	}

	path, args := spec.Path, spec.Args
	if spec.NetNS != "" {
		path, args = "ip", append([]string{"netns", "exec", spec.NetNS, spec.Path}, spec.Args...)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = spec.Dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(childEnv(), spec.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: a Ctrl-C in the terminal reaches only the parent, which then stops
		// the children in order instead of all at once.
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := startFromLockedThread(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	p := &Process{Name: spec.Name, Path: spec.Path, LogPath: logPath, Tier: spec.Tier, spec: spec, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	return env
}

// PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process, and the
// Go runtime may retire threads. All children are therefore forked from one goroutine locked to
// its thread for the life of the program.
var spawner struct {
	once sync.Once
	reqs chan spawnRequest
}

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

func startFromLockedThread(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must outlive every child
			for r := range spawner.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawner.reqs <- spawnRequest{cmd: cmd, done: done}
	return <-done
}

// onStop registers f to run at the start of stop, before any process is signalled.
func (s *supervisor) onStop(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onStops = append(s.onStops, f)
}

// stop stops every process, tier by tier: SIGTERM, then SIGKILL after stopTimeout. It returns
// an error only if a process could not be signalled; exit statuses after SIGTERM are expected.
func (s *supervisor) stop() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	procs := append([]*Process(nil), s.procs...)
	hooks := s.onStops
	s.mu.Unlock()

	for i := len(hooks) - 1; i >= 0; i-- {
		hooks[i]()
	}
	sort.SliceStable(procs, func(i, j int) bool { return procs[i].Tier < procs[j].Tier })
	var errs []error
	for i := 0; i < len(procs); {
		j := i
		for j < len(procs) && procs[j].Tier == procs[i].Tier {
			j++
		}
		errs = append(errs, s.stopGroup(procs[i:j])...)
		i = j
	}
	return errors.Join(errs...)
}

func (s *supervisor) stopGroup(group []*Process) []error {
	var errs []error
	for _, p := range group {
		if exited, _ := p.Exited(); exited {
			continue
		}
		p.stopped.Store(true)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("stop %s: %w", p.Name, err))
		}
	}
	deadline := time.NewTimer(s.stopTimeout)
	defer deadline.Stop()
	for _, p := range group {
		select {
		case <-p.done:
		case <-deadline.C:
			// Keep draining: every remaining process gets SIGKILL below.
			deadline.Reset(0)
		}
	}
	for _, p := range group {
		if exited, _ := p.Exited(); exited {
			continue
		}
		s.log.Info("process did not stop in time, killing", "process", p.Name, "pid", p.PID(), "timeout", s.stopTimeout)
		if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("kill %s: %w", p.Name, err))
			continue
		}
		<-p.done
	}
	return errs
}

// processes returns the started processes, in start order.
func (s *supervisor) processes() []*Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Process(nil), s.procs...)
}

// daemons returns the long-running processes (not those started by run).
func (s *supervisor) daemons() []*Process {
	var out []*Process
	for _, p := range s.processes() {
		if !p.oneShot {
			out = append(out, p)
		}
	}
	return out
}

// firstUnexpectedExit returns an error for the first process that exited without being stopped.
func (s *supervisor) firstUnexpectedExit() error {
	for _, p := range s.processes() {
		if exited, _ := p.Exited(); exited && !p.stopped.Load() && !p.oneShot && !p.replaced.Load() {
			return p.exitError()
		}
	}
	return nil
}

// CPUTime is the CPU time (user and system) the running process has used so far; 0 when it is
// not running or /proc cannot say. Benchmarks bound by a control-plane process report its CPU
// per unit of work: unlike their wall time, that figure hardly moves with other load.
func (p *Process) CPUTime() time.Duration {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return CPUTimeOf(p.cmd.Process.Pid)
}

// CPUTimeOf is the CPU time (user and system) process pid has used so far; 0 when /proc cannot
// say.
func CPUTimeOf(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces, inside parentheses): state is 3rd,
	// utime and stime the 14th and 15th of the whole line.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// MemoryOf is a memory figure of process pid from /proc/<pid>/status in bytes, field one of its
// "kB" lines (VmRSS, VmHWM: the peak); 0 when /proc cannot say.
func MemoryOf(pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux platform Go
// supports here.
const clockTicks = 100
