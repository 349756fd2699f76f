package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// Ports are also reserved host-wide, between tollgate processes: two
// tollgates on one host pick from the same ranges, and an instance
// listens a whole cold start after its port was picked, so both could
// give their instance the same port, and the second's readiness check
// would pass on the first's listener. Each reserved port has a file in
// hostPortsDir, locked (flock) while an instance of this process holds
// the port. The kernel drops a dead process's locks with its files, so a
// tollgate killed with SIGKILL reserves nothing; the file of a port
// released cleanly is removed.

// hostPortsDir is the directory of the port files, made once, shared by
// the host's users as /tmp is (mode 1777); "" and the error when it
// cannot be made, and then ports are reserved in this process only.
var hostPortsDir = sync.OnceValues(func() (string, error) {
	dir := filepath.Join(os.TempDir(), "tollgate-ports")
	if err := os.MkdirAll(dir, 0o777|os.ModeSticky); err != nil {
		return "", fmt.Errorf("reserving instance ports host-wide: %w", err)
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm() != 0o777 && fi.Sys().(*syscall.Stat_t).Uid == uint32(os.Getuid()) {
		_ = os.Chmod(dir, 0o777|os.ModeSticky) // the umask narrowed MkdirAll's mode
	}
	return dir, nil
})

// errPortLocked is lockPort's answer for a port another process holds.
var errPortLocked = errors.New("the port is reserved by another process")

// lockPort reserves port host-wide in dir: it returns the locked file,
// which unlockPort releases, or errPortLocked when another process holds
// the port.
func lockPort(dir string, port int) (*os.File, error) {
	path := filepath.Join(dir, strconv.Itoa(port))
	for range 3 {
		f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644) // O_CLOEXEC: not inherited by instances
		if err != nil {
			return nil, fmt.Errorf("reserving port %d: %w", port, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, errPortLocked
			}
			return nil, fmt.Errorf("reserving port %d: %w", port, err)
		}
		// The holder before us may have removed the file between our open
		// and our lock: then the lock is on a file nobody else can find,
		// and we go again with the path's file.
		var held, named syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &held) == nil && syscall.Stat(path, &named) == nil && held.Ino == named.Ino && held.Dev == named.Dev {
			return f, nil
		}
		f.Close()
	}
	return nil, errPortLocked
}

// unlockPort releases a port lockPort reserved: the file is removed while
// still locked, so no process can lock it after the release and believe
// it holds the port's current file.
func unlockPort(f *os.File) {
	_ = os.Remove(f.Name())
	_ = f.Close()
}
