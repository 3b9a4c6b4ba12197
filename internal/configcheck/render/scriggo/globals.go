package scriggo

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// The globals below are haptic's render context (its rendercontext
// package), with what haptic's templates call on them.

// runtimeEnvironment is haptic's runtimeEnvironment.
type runtimeEnvironment struct {
	GOMAXPROCS int
}

// pathResolver is haptic's pathResolver: where HAProxy finds an auxiliary
// file of each type. The directories are Gatehouse's checker's layout,
// relative to the configuration's own directory.
type pathResolver struct {
	baseDir, mapsDir, sslDir, crtListDir, generalDir string
}

// GetBaseDir is the directory relative paths are resolved against.
func (p *pathResolver) GetBaseDir() string { return p.baseDir }

// GetPath(name, type) is name's path for its type ("map", "file",
// "cert" or "crt-list"); an empty name is the type's directory.
// Certificate and crt-list names are sanitized as haptic stores them.
func (p *pathResolver) GetPath(args ...any) (any, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("GetPath takes a file name and a file type, got %d arguments", len(args))
	}
	name, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("GetPath: the file name must be a string, got %T", args[0])
	}
	fileType, ok := args[1].(string)
	if !ok {
		return nil, fmt.Errorf("GetPath: the file type must be a string, got %T", args[1])
	}
	return p.path(name, fileType)
}

func (p *pathResolver) path(name, fileType string) (string, error) {
	var dir string
	switch fileType {
	case "map":
		dir = p.mapsDir
	case "file":
		dir = p.generalDir
	case "cert":
		dir = p.sslDir
	case "crt-list":
		dir = p.crtListDir
	default:
		return "", fmt.Errorf(`GetPath: file type %q is none of "map", "file", "cert", "crt-list"`, fileType)
	}
	if name == "" {
		return dir, nil
	}
	if fileType == "cert" || fileType == "crt-list" {
		name = storageName(name)
	}
	return path.Join(dir, name), nil
}

var unsafeStorageName = regexp.MustCompile(`[^a-zA-Z0-9_\-]+`)

// storageName is a certificate's or crt-list's file name as haptic's
// storage keeps it: every run of characters other than letters, digits,
// _ and - in its base becomes one _, its extension kept.
func storageName(name string) string {
	ext := path.Ext(name)
	return unsafeStorageName.ReplaceAllString(strings.TrimSuffix(name, ext), "_") + ext
}

// fileRegistry is haptic's fileRegistry: templates add auxiliary files
// while rendering; the rendering outputs them beside the configured ones.
type fileRegistry struct {
	paths *pathResolver
	files map[string]registeredFile // by type:name
}

type registeredFile struct {
	fileType, name, content, path string
}

// Register(type, name, content) adds a file and returns its path. The
// same file registered twice must have the same content.
func (r *fileRegistry) Register(args ...any) (string, error) {
	if len(args) != 3 {
		return "", fmt.Errorf("fileRegistry.Register takes a type, a file name and a content, got %d arguments", len(args))
	}
	var parts [3]string
	for i, what := range []string{"type", "file name", "content"} {
		s, ok := args[i].(string)
		if !ok {
			return "", fmt.Errorf("fileRegistry.Register: the %s must be a string, got %T", what, args[i])
		}
		parts[i] = s
	}
	fileType, name, content := parts[0], parts[1], parts[2]
	filePath, err := r.paths.path(name, fileType)
	if err != nil {
		return "", fmt.Errorf("fileRegistry.Register: %w", err)
	}
	key := fileType + ":" + name
	if existing, ok := r.files[key]; ok {
		if existing.content != content {
			return "", fmt.Errorf("fileRegistry.Register: %s %q registered twice with different contents (%d and %d bytes)", fileType, name, len(existing.content), len(content))
		}
		return existing.path, nil
	}
	r.files[key] = registeredFile{fileType: fileType, name: name, content: content, path: filePath}
	return filePath, nil
}

// sharedContext is haptic's shared: values computed once per rendering and
// seen by every template of it. A rendering here is sequential, so a
// compute function runs to its end before anything else asks.
type sharedContext struct {
	values map[string]any
}

// Get is the value computed for key, or nil.
func (s *sharedContext) Get(key string) any { return s.values[key] }

// ComputeIfAbsent returns key's value, computing and keeping it first if
// there is none; computed reports whether this call computed it.
func (s *sharedContext) ComputeIfAbsent(key string, compute func() any) (value any, computed bool) {
	if v, ok := s.values[key]; ok {
		return v, false
	}
	v := compute()
	// compute may have asked for key itself (through another template):
	// the first value kept stays.
	if kept, ok := s.values[key]; ok {
		return kept, false
	}
	s.values[key] = v
	return v, true
}

// httpFetcher is haptic's http: in Gatehouse it never reaches the
// network; it answers from a validation test's httpResources only.
type httpFetcher struct {
	resources map[string]string
}

// Fetch(url, [options], [auth]) is the url's content from the test's
// httpResources; any other url is an error naming it.
func (h *httpFetcher) Fetch(args ...any) (any, error) {
	if len(args) < 1 || len(args) > 3 {
		return nil, fmt.Errorf("http.Fetch takes a URL, options and credentials, got %d arguments", len(args))
	}
	url, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("http.Fetch: the URL must be a string, got %T", args[0])
	}
	content, ok := h.resources[url]
	if !ok {
		return nil, fmt.Errorf("http.Fetch %s: Gatehouse never fetches from the network; a validation test provides a URL's content in its httpResources", url)
	}
	return content, nil
}

// currentConfig is the part of haptic's parsed running configuration its
// templates read: backends and their servers, for slot preservation.
type currentConfig struct {
	Backends []currentBackend
}

type currentBackend struct {
	Name    string
	Servers map[string]currentServer
}

type currentServer struct {
	Name    string
	Address string
	Port    *int64
}
