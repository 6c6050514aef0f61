package fake

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"skiff.dev/skiff/runtime"
)

// Security in the simulation: a container keeps a copy of its
// runtime.SecuritySpec (Security reads it back), with the user resolved
// as containerd would for an image without /etc/passwd (the image's
// numeric user, else root; a named user cannot be found). `id` in the
// simulated shell prints it as busybox's id does: uid, gid and the
// groups (the primary group and the supplemental ones).
// A seccomp profile file that does not exist fails the create, as it
// does on containerd.

// recordSecurity copies sec for a container of img, with RunAsUser and
// RunAsGroup resolved.
func recordSecurity(sec *runtime.SecuritySpec, img runtime.ImageInfo) (*runtime.SecuritySpec, error) {
	if sec == nil {
		return nil, nil
	}
	out := *sec
	out.SupplementalGroups = slices.Clone(sec.SupplementalGroups)
	out.CapAdd, out.CapDrop = slices.Clone(sec.CapAdd), slices.Clone(sec.CapDrop)
	out.MaskedPaths, out.ReadonlyPaths = slices.Clone(sec.MaskedPaths), slices.Clone(sec.ReadonlyPaths)
	if sec.Sysctls != nil {
		out.Sysctls = make(map[string]string, len(sec.Sysctls))
		for k, v := range sec.Sysctls {
			out.Sysctls[k] = v
		}
	}
	if out.RunAsUser == nil {
		user := out.Username
		if user == "" {
			user, _, _ = strings.Cut(img.User, ":")
		}
		uid := int64(0)
		if user != "" {
			n, err := strconv.ParseInt(user, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("no users found (simulated image %s has no /etc/passwd): %q: %w", img.Name, user, runtime.ErrInvalidSpec)
			}
			uid = n
		}
		out.RunAsUser = &uid
	}
	if out.RunAsGroup == nil {
		gid := int64(0)
		if _, g, ok := strings.Cut(img.User, ":"); ok && sec.RunAsUser == nil {
			if n, err := strconv.ParseInt(g, 10, 64); err == nil {
				gid = n
			}
		}
		out.RunAsGroup = &gid
	}
	if out.Seccomp == runtime.SeccompLocalhost {
		if _, err := os.Stat(out.SeccompProfilePath); err != nil {
			return nil, fmt.Errorf("cannot load seccomp profile %q: %w: %w", out.SeccompProfilePath, runtime.ErrInvalidSpec, errors.Unwrap(err))
		}
	}
	return &out, nil
}

// Security returns the security settings container id was created with
// (nil when it was created without).
func (r *Runtime) Security(id string) (*runtime.SecuritySpec, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.get(id)
	if err != nil {
		return nil, err
	}
	if c.spec.Security == nil {
		return nil, nil
	}
	out, _ := recordSecurity(c.spec.Security, runtime.ImageInfo{})
	return out, nil
}

// idOutput is what `id` prints in a container with sec.
func idOutput(sec *runtime.SecuritySpec) string {
	uid, gid := int64(0), int64(0)
	var groups []int64
	if sec != nil {
		if sec.RunAsUser != nil {
			uid = *sec.RunAsUser
		}
		if sec.RunAsGroup != nil {
			gid = *sec.RunAsGroup
		}
		groups = slices.Clone(sec.SupplementalGroups)
	}
	groups = append(groups, gid)
	slices.Sort(groups)
	groups = slices.Compact(groups)
	name := func(id int64) string {
		if id == 0 {
			return "0(root)"
		}
		return strconv.FormatInt(id, 10)
	}
	gs := make([]string, len(groups))
	for i, g := range groups {
		gs[i] = name(g)
	}
	return fmt.Sprintf("uid=%s gid=%s groups=%s", name(uid), name(gid), strings.Join(gs, ","))
}
