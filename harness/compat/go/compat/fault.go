// KillLeaderAt: COMPAT_KILL_LEADER run so that a scenario learns the moment the kill -9 took
// effect, while the command still waits for a new leader and restarts the node (Compat.fault of
// the JVM drivers): share_leader_kill accepts records it held across the kill only then.

package compat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// KilledMarker is in the line a kill command prints once its kill -9 took effect: kill-kafka.sh's
// "node N killed after", cluster.sh's "killed with SIGKILL".
const KilledMarker = "killed"

// KillLeaderAt runs COMPAT_KILL_LEADER through sh like KillLeader, its output (stdout and stderr)
// copied to stderr line by line. onKilled runs once: as soon as a line holding KilledMarker
// appears, or when the command ends if none does. Answers when that line was read (else when
// the command started) and the command's error.
func KillLeaderAt(ctx context.Context, onKilled func()) (time.Time, error) {
	command := os.Getenv("COMPAT_KILL_LEADER")
	if command == "" {
		onKilled()
		return time.Time{}, errors.New("COMPAT_KILL_LEADER is not set")
	}
	started := time.Now()
	r, w, err := os.Pipe()
	if err != nil {
		onKilled()
		return started, err
	}
	defer r.Close()
	c := exec.CommandContext(ctx, "sh", "-c", command)
	c.Stdout, c.Stderr = w, w
	err = c.Start()
	w.Close()
	if err != nil {
		onKilled()
		return started, err
	}
	var (
		once   sync.Once
		marked time.Time
		mu     sync.Mutex
		copied = make(chan struct{})
	)
	go func() {
		defer close(copied)
		lines := bufio.NewScanner(r)
		for lines.Scan() {
			fmt.Fprintln(os.Stderr, lines.Text())
			if strings.Contains(lines.Text(), KilledMarker) {
				once.Do(func() {
					mu.Lock()
					marked = time.Now()
					mu.Unlock()
					onKilled()
				})
			}
		}
	}()
	err = c.Wait()
	// A node the command restarted may hold the pipe open: wait a little for the last lines only.
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
	}
	once.Do(onKilled)
	mu.Lock()
	defer mu.Unlock()
	if marked.IsZero() {
		marked = started
	}
	if err != nil {
		return marked, fmt.Errorf("COMPAT_KILL_LEADER: %w", err)
	}
	return marked, nil
}
