package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"skiff.dev/skiff/api"
)

// resourceRef is one kind and the names asked for (none: all of the kind).
type resourceRef struct {
	Kind  *api.Kind
	Names []string
}

// errNoResourceType is kubectl's message for a bare verb.
func errNoResourceType(verb string) error {
	return fmt.Errorf("you must specify the type of resource to %s. Use \"skiff api-resources\" for a complete list of supported resources", verb)
}

// parseResourceArgs reads kubectl's argument forms:
//
//	pods                      every pod
//	po web db                 two pods
//	configmap,deploy,pods,svc several kinds
//	deploy/web pods/db        KIND/NAME pairs
//	deployments.apps web      resource.group
func parseResourceArgs(verb string, args []string) ([]resourceRef, error) {
	if len(args) == 0 {
		return nil, errNoResourceType(verb)
	}
	slashed := 0
	for _, a := range args {
		if strings.Contains(a, "/") {
			slashed++
		}
	}
	if slashed > 0 {
		if slashed != len(args) {
			return nil, fmt.Errorf("there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'skiff %s resource/<resource_name>' instead of 'skiff %s resource resource/<resource_name>')", verb, verb)
		}
		var refs []resourceRef
		for _, a := range args {
			kindName, name, _ := strings.Cut(a, "/")
			if name == "" || kindName == "" || strings.Contains(name, "/") {
				return nil, fmt.Errorf("arguments in resource/name form must have a single resource and name: %q", a)
			}
			k, err := api.LookupResource(kindName)
			if err != nil {
				return nil, err
			}
			refs = addRef(refs, k, name)
		}
		return refs, nil
	}
	kinds, err := parseKinds(args[0])
	if err != nil {
		return nil, err
	}
	var refs []resourceRef
	for _, k := range kinds {
		refs = append(refs, resourceRef{Kind: k, Names: append([]string(nil), args[1:]...)})
	}
	return refs, nil
}

// parseKinds reads "configmap,deploy,pods,svc" (and "all").
func parseKinds(s string) ([]*api.Kind, error) {
	var kinds []*api.Kind
	seen := map[*api.Kind]bool{}
	add := func(name string) error {
		k, err := api.LookupResource(name)
		if err != nil {
			return err
		}
		if !seen[k] {
			seen[k] = true
			kinds = append(kinds, k)
		}
		return nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		switch part {
		case "":
			return nil, fmt.Errorf("invalid resource list %q: empty name", s)
		case "all": // kubectl's "all" category, as discovery lists it
			for _, k := range api.Kinds {
				if slices.Contains(k.Categories, "all") && !seen[k] {
					seen[k] = true
					kinds = append(kinds, k)
				}
			}
		default:
			if err := add(part); err != nil {
				return nil, err
			}
		}
	}
	if len(kinds) == 0 {
		return nil, errors.New("no resource type given")
	}
	return kinds, nil
}

// addRef appends name to the ref of kind k, keeping first-seen order.
func addRef(refs []resourceRef, k *api.Kind, name string) []resourceRef {
	for i := range refs {
		if refs[i].Kind == k {
			refs[i].Names = append(refs[i].Names, name)
			return refs
		}
	}
	return append(refs, resourceRef{Kind: k, Names: []string{name}})
}

// kindPrefix is how kubectl names a kind in output: "pod", "deployment.apps".
func kindPrefix(k *api.Kind) string {
	s := strings.ToLower(k.Kind)
	if k.Group != "" {
		s += "." + k.Group
	}
	return s
}

// objectRef is "deployment.apps/web", as -o name and apply print it.
func objectRef(k *api.Kind, name string) string { return kindPrefix(k) + "/" + name }

// kindOf returns the kind of obj, or a generic one for unregistered types.
func kindOf(obj api.Object) *api.Kind {
	if k, err := api.KindOf(obj); err == nil {
		return k
	}
	tm := obj.GetTypeMeta()
	return &api.Kind{Kind: tm.Kind, Version: tm.APIVersion}
}

// namespaceFor picks the namespace a request of kind k uses.
func (r *Root) namespaceFor(k *api.Kind, all bool) string {
	if !k.Namespaced || all {
		return ""
	}
	return r.Namespace
}
