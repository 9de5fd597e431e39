package egress

import "syscall"

// cgroupAttr starts a child directly in the group of dirfd
// (CLONE_INTO_CGROUP), so it never runs outside it.
func cgroupAttr(dirfd int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: dirfd}
}
