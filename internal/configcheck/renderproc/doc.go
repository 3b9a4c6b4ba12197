// Package renderproc renders configcheck's templates in a pool of worker
// processes, so that no template can exhaust Gatehouse: a template is a
// program its config's author wrote, and text/template can neither bound
// the memory of a rendering nor stop one that never writes. A worker is
// the running binary re-executed in worker mode and confined by
// internal/sandbox; it has a memory budget (enforced by RLIMIT_DATA and
// steered by GOMEMLIMIT), runs at a lower CPU priority than the server
// (nice), reads no file, reaches no network, starts no process, and is
// killed, its CPU stopping at
// once, when the rendering's context ends. Whatever a worker does (run out
// of memory, overflow its stack on a cyclic value, crash), that rendering
// fails with a clear error and the pool starts a new worker on next use;
// the server and the other workers carry on.
//
// # Use
//
// [New] makes a [Pool]; [Pool.Compile] parses templates in-process (its
// errors are render's *CompileError, for the config webhook; parsing
// executes nothing) and returns a [render.Renderer] whose Render runs in a
// worker. A Render waits for a free worker as long as its context allows,
// and is never retried: a rendering that killed its worker would kill the
// next one too.
//
// Errors keep their meaning across the process boundary: a template's
// fail is a *render.FailError with exactly its message, inside a
// *render.RenderError naming the template, and the error texts are those
// an in-process rendering gives. A context that ends first gives an error
// wrapping ctx.Err(); a rendering out of memory gives a *[BudgetError];
// a worker that died otherwise gives a *[ProcessDiedError].
//
// # Protocol
//
// Parent and worker exchange frames on the worker's stdin and stdout: a
// 4-byte big-endian length, then that many bytes of JSON. The parent sends
// one request, the worker answers with one frame, and so on; the parent
// reads an answer only up to a size derived from Options.MaxOutputBytes
// and kills a worker that claims more, so a worker cannot make the server
// allocate without bound.
//
// A worker keeps what it was sent, so an admission request does not
// resend the stores: the compiled template set, by a hash of the
// templates; and the last snapshot of each render.MemoryStore, by the
// store's identity and version. A request names a store the worker holds
// at the current version, and carries a snapshot (objects and indexBy
// expressions) otherwise; an overlay is sent as its base plus the one
// changed object. The parent tracks what each worker holds, and tells it
// what to forget when that exceeds a share of its memory budget.
//
// Objects cross as JSON and are decoded with UseNumber and normalized by
// the worker's stores, so templates see the same int64 and float64 values
// as in-process. Strings in objects must be valid UTF-8, which any
// JSON-decoded object (all of Kubernetes' data) is; template texts, the
// rendered files and error messages cross as bytes, exactly.
//
// # Starting workers
//
// Options.Command makes the worker's command. The default starts this
// binary in the sandbox's entry mode "render-worker" (sandbox.Command with
// Spec.Entry), with the limits set by the sandbox before the worker's
// runtime starts; this package's init recognizes the entry and runs [Main]
// instead of main (or the tests: init runs before TestMain).
package renderproc
