//go:build linux

package cli

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// openPTY opens a pseudo-terminal pair through /dev/ptmx: the controller
// the test reads and writes, and the terminal a child process gets as
// its controlling terminal.
func openPTY() (controller, term *os.File, err error) {
	c, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	var unlock int32
	if err := ioctl(c, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("unlockpt: %w", err)
	}
	var n uint32
	if err := ioctl(c, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("ptsname: %w", err)
	}
	t, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, t, nil
}

func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}
