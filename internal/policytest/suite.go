package policytest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// APIVersion and Kind name the suite format. A later format gets a new
// version; this one is read as long as Gatehouse ships it.
const (
	APIVersion = "gatehouse.dev/v1alpha1"
	Kind       = "TestSuite"
)

// Suite is one suite file.
type Suite struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	// Name names the suite in reports; default: the file's name.
	Name string `yaml:"name"`
	// Modules are the modules the suite builds, each with its enforcement
	// (enforce, the default, or warn). Default: the modules the tests name
	// and, for a test naming none, those whose webhooks it may reach.
	Modules map[string]ModuleConfig `yaml:"modules"`
	// Namespace is the namespace Gatehouse runs in (its own namespace,
	// which placement's audit leaves out). Default gatehouse-system.
	Namespace string `yaml:"namespace"`
	// ObjectFiles are YAML files of objects (--- separated, Lists allowed),
	// relative to the suite's directory, loaded into the cluster state.
	ObjectFiles []string `yaml:"objectFiles"`
	// Objects are more objects of the cluster state.
	Objects []map[string]any `yaml:"objects"`
	// Permissions answer the SubjectAccessReviews modules make for a
	// request's user. Members of system:masters may do anything; anyone
	// else only what a permission grants.
	Permissions []Permission `yaml:"permissions"`
	// ConfigChecks run HAProxyTemplateConfigs' embedded validation tests
	// (what `gatehouse configcheck test` runs), each test a result of the
	// suite.
	ConfigChecks []ConfigCheck `yaml:"configChecks"`
	Tests        []Test        `yaml:"tests"`

	// file is where the suite was read from; dir resolves ObjectFiles.
	file, dir string
	// lines finds a field's line for errors found after decoding.
	root *yaml.Node
	// objects is the cluster state, decoded.
	objects []*unstructured.Unstructured
}

// ModuleConfig is a module's settings in a suite.
type ModuleConfig struct {
	Enforcement string `yaml:"enforcement"`
}

// Permission grants verbs on resources to a user or a group.
type Permission struct {
	User       string   `yaml:"user"`
	Group      string   `yaml:"group"`
	Verbs      []string `yaml:"verbs"`
	APIGroups  []string `yaml:"apiGroups"`
	Resources  []string `yaml:"resources"`
	Namespaces []string `yaml:"namespaces"`
	Names      []string `yaml:"names"`
}

// ConfigCheck names an HAProxyTemplateConfig whose embedded tests run.
type ConfigCheck struct {
	// File is the config's YAML, relative to the suite's directory.
	File string `yaml:"file"`
	// Test runs one embedded test alone.
	Test string `yaml:"test"`
	// Asks are the entry's other keys, for the module that checks the
	// file (module.OfflineRequest.Asks): configcheck's allowLua checks as
	// a cluster started with --configcheck-allow-lua, when the job allows
	// it.
	Asks map[string]any `yaml:",inline"`
}

// Test is one request and what its answer must be.
type Test struct {
	Name string `yaml:"name"`
	// Module and Webhook choose the webhook; either may be left out when
	// the request's kind, resource and operation match the rules of one
	// webhook only. A conversion goes to the conversion webhook of the
	// module serving its objects' CRD.
	Module  string `yaml:"module"`
	Webhook string `yaml:"webhook"`
	// Request is an admission request; Conversion a conversion. One of
	// the two.
	Request    *Request    `yaml:"request"`
	Conversion *Conversion `yaml:"conversion"`
	Expect     Expect      `yaml:"expect"`
}

// Request is the admission request as kube-apiserver would send it.
type Request struct {
	// Operation is CREATE, UPDATE, DELETE or CONNECT.
	Operation string `yaml:"operation"`
	// APIVersion, Kind, Name and Namespace name the object; taken from
	// Object (or OldObject) when left out.
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Name       string `yaml:"name"`
	Namespace  string `yaml:"namespace"`
	// SubResource is e.g. "status" or "scale".
	SubResource string `yaml:"subResource"`
	// Object is the new object (CREATE, UPDATE). OldObject is the stored
	// object (UPDATE, DELETE); a DELETE without it is sent the cluster
	// state's object of that kind and name, as kube-apiserver sends the
	// stored one.
	Object    map[string]any `yaml:"object"`
	OldObject map[string]any `yaml:"oldObject"`
	// ObjectFile reads Object from a file of one object, relative to the
	// suite's directory.
	ObjectFile string   `yaml:"objectFile"`
	UserInfo   UserInfo `yaml:"userInfo"`
	DryRun     bool     `yaml:"dryRun"`
}

// UserInfo is the requesting user. Default: "suite-user", in no group but
// system:authenticated.
type UserInfo struct {
	Username string              `yaml:"username"`
	UID      string              `yaml:"uid"`
	Groups   []string            `yaml:"groups"`
	Extra    map[string][]string `yaml:"extra"`
}

// Conversion is a ConversionReview's request.
type Conversion struct {
	DesiredAPIVersion string           `yaml:"desiredAPIVersion"`
	Objects           []map[string]any `yaml:"objects"`
}

// Expect is what the answer must be. Allowed is required.
type Expect struct {
	// Allowed: the request was admitted (in warn mode, a denial is
	// admitted with warnings), or the conversion succeeded. false expects a
	// policy denial (403); an error answer (400, 500, 503) fails the test
	// unless Code names its code.
	Allowed *bool `yaml:"allowed"`
	// Code is the answer's HTTP status code inside the review (403 for a
	// denial, 400 for a request the module cannot read, 503 undecided).
	Code int32 `yaml:"code"`
	// MessageContains are substrings the answer's message must each hold;
	// MessageNotContains those it must not.
	MessageContains    []string `yaml:"messageContains"`
	MessageNotContains []string `yaml:"messageNotContains"`
	// WarningsContain are substrings each found in some warning; NoWarnings
	// expects none at all.
	WarningsContain []string `yaml:"warningsContain"`
	NoWarnings      bool     `yaml:"noWarnings"`
	// PatchedObject is the object after a mutating webhook's patch,
	// compared whole (a mutating webhook without a patch leaves the object
	// as it was).
	PatchedObject map[string]any `yaml:"patchedObject"`
	// ConvertedObjects are a conversion's output objects, compared whole
	// and in order.
	ConvertedObjects []map[string]any `yaml:"convertedObjects"`
	// Called: whether kube-apiserver calls any of Gatehouse's webhooks for
	// the request at all, after their rules, namespaceSelector,
	// objectSelector and matchConditions (false: it admits the request
	// without asking Gatehouse).
	Called *bool `yaml:"called"`
}

// Load reads a suite file (- for standard input is the caller's to
// resolve: LoadBytes).
func Load(path string) (*Suite, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return LoadBytes(path, data)
}

// KindOf is the kind a YAML document names, "" when it cannot be read:
// `gatehouse test` tells a suite from a document a module checks offline
// (an HAProxyTemplateConfig) by it.
func KindOf(data []byte) string {
	var head struct {
		Kind string `yaml:"kind"`
	}
	_ = yaml.Unmarshal(data, &head)
	return head.Kind
}

// LoadBytes decodes and checks a suite read from path: unknown fields, a
// wrong apiVersion or kind, a test without a request, an expectation
// without allowed, and unreadable object files are errors naming the line.
func LoadBytes(path string, data []byte) (*Suite, error) {
	s := &Suite{file: path, dir: filepath.Dir(path)}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.root = &root
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, fmt.Errorf("%s: one suite per file: a second YAML document follows", path)
	}
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	if errs := s.validate(); len(errs) > 0 {
		return nil, fmt.Errorf("%s: invalid suite:\n  %s", path, strings.Join(errs, "\n  "))
	}
	if err := s.loadObjects(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// validate checks what decoding cannot; each error names its line.
func (s *Suite) validate() []string {
	var errs []string
	add := func(format string, path ...any) func(args ...any) {
		return func(args ...any) {
			errs = append(errs, fmt.Sprintf("line %d: %s", s.line(path...), fmt.Sprintf(format, args...)))
		}
	}
	if s.APIVersion != APIVersion || s.Kind != Kind {
		add("apiVersion %q, kind %q: want apiVersion %s, kind %s", "kind")(s.APIVersion, s.Kind, APIVersion, Kind)
	}
	for name, mc := range s.Modules {
		switch mc.Enforcement {
		case "", "enforce", "warn":
		default:
			add("modules.%s.enforcement %q: want enforce or warn", "modules", name)(name, mc.Enforcement)
		}
	}
	for i, p := range s.Permissions {
		if (p.User == "") == (p.Group == "") {
			add("permissions[%d]: give a user or a group", "permissions", i)(i)
		}
		if len(p.Verbs) == 0 || len(p.Resources) == 0 {
			add("permissions[%d]: verbs and resources are required (\"*\" for any)", "permissions", i)(i)
		}
	}
	for i, c := range s.ConfigChecks {
		if c.File == "" {
			add("configChecks[%d].file is required", "configChecks", i)(i)
		}
	}
	if len(s.Tests) == 0 && len(s.ConfigChecks) == 0 {
		add("the suite has no tests and no configChecks", "kind")()
	}
	seen := map[string]bool{}
	for i, t := range s.Tests {
		at := func(format string, args ...any) {
			add("tests[%d] (%s): "+format, "tests", i)(append([]any{i, t.Name}, args...)...)
		}
		if t.Name == "" {
			at("name is required")
		} else if seen[t.Name] {
			at("a second test of this name")
		}
		seen[t.Name] = true
		if (t.Request == nil) == (t.Conversion == nil) {
			at("give a request or a conversion, not both")
			continue
		}
		switch {
		case t.Expect.Called != nil && t.Conversion != nil:
			at("expect.called is for requests: a conversion is always called")
		case t.Expect.Allowed == nil && t.Expect.Called == nil:
			at("expect.allowed is required (or expect.called)")
		}
		if r := t.Request; r != nil {
			switch r.Operation {
			case "CREATE", "UPDATE", "DELETE", "CONNECT":
			default:
				at("request.operation %q: want CREATE, UPDATE, DELETE or CONNECT", r.Operation)
			}
			if r.ObjectFile != "" {
				if r.Object != nil {
					at("give request.object or request.objectFile, not both")
				} else if objs, err := readObjectFile(s.dir, r.ObjectFile); err != nil {
					at("request.objectFile: %v", err)
				} else if len(objs) != 1 {
					at("request.objectFile %s holds %d objects, not one", r.ObjectFile, len(objs))
				} else {
					r.Object = objs[0].Object
				}
			}
			if r.Object == nil && r.OldObject == nil && (r.Kind == "" || r.Name == "") {
				at("request needs an object, an oldObject, or a kind and name to take from the cluster state")
			}
			if (r.Operation == "CREATE" || r.Operation == "UPDATE") && r.Object == nil {
				at("request.object is required for %s", r.Operation)
			}
			if len(t.Expect.ConvertedObjects) > 0 {
				at("expect.convertedObjects applies to a conversion")
			}
		}
		if c := t.Conversion; c != nil {
			if c.DesiredAPIVersion == "" || len(c.Objects) == 0 {
				at("conversion needs desiredAPIVersion and objects")
			}
			if t.Expect.PatchedObject != nil || len(t.Expect.WarningsContain) > 0 || t.Expect.NoWarnings {
				at("a conversion has no patch and no warnings")
			}
		}
	}
	return errs
}

// loadObjects reads the cluster state: the object files, then the inline
// objects.
func (s *Suite) loadObjects() error {
	for i, path := range s.ObjectFiles {
		objs, err := readObjectFile(s.dir, path)
		if err != nil {
			return fmt.Errorf("line %d: objectFiles[%d]: %w", s.line("objectFiles", i), i, err)
		}
		s.objects = append(s.objects, objs...)
	}
	for i, o := range s.Objects {
		u, err := toObject(o)
		if err != nil {
			return fmt.Errorf("line %d: objects[%d]: %w", s.line("objects", i), i, err)
		}
		s.objects = append(s.objects, u)
	}
	return nil
}

// decodeObjects reads a multi-document YAML file of objects; a List's
// items are objects of their own.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for n := 0; ; n++ {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n+1, err)
		}
		if doc == nil {
			continue
		}
		u, err := toObject(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n+1, err)
		}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", n+1, err)
			}
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
			continue
		}
		out = append(out, u)
	}
}

// toObject checks that m is an object: apiVersion, kind and metadata.name.
func toObject(m map[string]any) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: jsonValues(m).(map[string]any)}
	if u.GetAPIVersion() == "" || u.GetKind() == "" {
		return nil, errors.New("an object needs apiVersion and kind")
	}
	if u.IsList() {
		return u, nil
	}
	if u.GetName() == "" {
		return nil, fmt.Errorf("%s %s: metadata.name is required", u.GetAPIVersion(), u.GetKind())
	}
	return u, nil
}

// jsonValues turns what YAML decodes (int, map[string]any, time values)
// into what JSON decodes (int64, float64, string), so that objects compare
// and convert as unstructured JSON.
func jsonValues(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = jsonValues(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = jsonValues(e)
		}
		return out
	case int:
		return int64(t)
	case uint64:
		return int64(t)
	case float32:
		return float64(t)
	case time.Time:
		return t.UTC().Format(time.RFC3339)
	}
	return v
}

// line finds the line of a field, following keys (string) and indexes
// (int) from the document's root as far as they exist.
func (s *Suite) line(path ...any) int {
	if s.root == nil || len(s.root.Content) == 0 {
		return 0
	}
	n := s.root.Content[0]
	for _, p := range path {
		next := (*yaml.Node)(nil)
		switch key := p.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == key {
						next = n.Content[i+1]
						if n.Content[i+1].Kind == yaml.ScalarNode {
							next = n.Content[i]
						}
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && key < len(n.Content) {
				next = n.Content[key]
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return n.Line
}

// A suite is data, and may come from a pull request that the CI job
// running `gatehouse test` does not trust: the files it names are read
// only from inside its own directory (no absolute path, no "..", no
// symbolic link leading out: os.Root), only regular files (a device such
// as /dev/zero would never end, a FIFO would block), and only up to
// maxSuiteFile. A refusal names the file and the rule, never its bytes.
const maxSuiteFile = 16 << 20

// readRelative reads a file named relative to the suite's directory.
func readRelative(dir, name string) ([]byte, error) {
	refuse := func(why string) error {
		return fmt.Errorf("%s: %s; a suite reads only regular files inside its own directory (%s), of at most %d MiB", name, why, dir, maxSuiteFile>>20)
	}
	if filepath.IsAbs(name) {
		return nil, refuse("an absolute path")
	}
	if !filepath.IsLocal(name) {
		return nil, refuse("a path leading out of the suite's directory")
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// O_NONBLOCK: opening a FIFO must not wait for a writer; a regular
	// file ignores it.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such file in %s", name, dir)
		}
		// Escapes through a symbolic link are refused by os.Root.
		return nil, refuse("not readable there (" + rootError(err) + ")")
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, refuse("not a regular file (" + info.Mode().Type().String() + ")")
	}
	if info.Size() > maxSuiteFile {
		return nil, refuse(fmt.Sprintf("%d bytes", info.Size()))
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSuiteFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSuiteFile {
		return nil, refuse("larger than the bound")
	}
	return data, nil
}

// rootError is err without the path os.Root quotes (the name is said
// already).
func rootError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// readObjectFile reads the objects of a file named relative to dir.
func readObjectFile(dir, name string) ([]*unstructured.Unstructured, error) {
	data, err := readRelative(dir, name)
	if err != nil {
		return nil, err
	}
	objs, err := decodeObjects(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return objs, nil
}
