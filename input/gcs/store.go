package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/snapwriter/snapwriter/internal/storeerr"
	"github.com/snapwriter/snapwriter/model"
)

// Defaults of a Store.
const (
	// DefaultTimeout is how long a request may go without an answer (a
	// listing page, or the next bytes of a download) before the read
	// fails: Cloud Storage that does not answer fails the command in
	// about this time, not a transfer that is merely large.
	DefaultTimeout = 30 * time.Second
	// DefaultWorkers is how many objects of a folder are read at once.
	DefaultWorkers = 16
	// MaxObjectBytes bounds one object of a snapshot folder: the
	// application's files are far smaller, so a larger one is refused
	// rather than read into memory.
	MaxObjectBytes = 256 << 20
)

// Store reads snapshot inputs from Cloud Storage with a client the caller
// owns (storage.NewClient: Application Default Credentials, or the local
// server STORAGE_EMULATOR_HOST names).
type Store struct {
	client   *storage.Client
	timeout  time.Duration
	within   string
	workers  int
	endpoint string
	// afterList, when set, runs once a folder is listed (tests: change
	// the bucket mid-read).
	afterList func()
}

// Option configures a Store.
type Option func(*Store)

// WithTimeout sets how long a request may go without an answer, and how
// the bound is named in an error ("30s (--request-timeout)"); "" names it by its
// duration.
func WithTimeout(d time.Duration, name string) Option {
	return func(s *Store) { s.timeout, s.within = d, name }
}

// WithWorkers sets how many objects of a folder are read at once.
func WithWorkers(n int) Option { return func(s *Store) { s.workers = max(n, 1) } }

// NewStore reads through client. emulatorHost is STORAGE_EMULATOR_HOST,
// for messages that name the endpoint ("" for Cloud Storage itself).
func NewStore(client *storage.Client, emulatorHost string, opts ...Option) *Store {
	s := &Store{client: client, timeout: DefaultTimeout, workers: DefaultWorkers, endpoint: Endpoint(emulatorHost)}
	for _, o := range opts {
		o(s)
	}
	if s.within == "" {
		s.within = s.timeout.String()
	}
	return s
}

// NewClient opens a storage client: of the server at emulatorHost
// (STORAGE_EMULATOR_HOST: host:port or a URL) when it is set, without
// credentials, else of Cloud Storage with Application Default
// Credentials. Reads use the JSON API either way, so that tests against a
// local server read as production does.
func NewClient(ctx context.Context, emulatorHost string) (*storage.Client, error) {
	if emulatorHost == "" {
		return storage.NewClient(ctx, storage.WithJSONReads())
	}
	if !strings.Contains(emulatorHost, "://") {
		emulatorHost = "http://" + emulatorHost
	}
	return storage.NewClient(ctx, option.WithEndpoint(strings.TrimSuffix(emulatorHost, "/")+"/storage/v1/"),
		option.WithoutAuthentication(), storage.WithJSONReads())
}

// Endpoint names the Cloud Storage a client reaches: the local server at
// emulatorHost when that is set (without credentials in it), else
// Cloud Storage itself.
func Endpoint(emulatorHost string) string {
	if emulatorHost == "" {
		return "Cloud Storage (storage.googleapis.com)"
	}
	if u, err := url.Parse(emulatorHost); err == nil && u.Host != "" {
		emulatorHost = u.Host
	}
	return "the Cloud Storage emulator at " + emulatorHost
}

// object is one listed object: its name below the folder, generation and
// size.
type object struct {
	name       string
	generation int64
	size       int64
}

// Entry is one dated input found under a folder (List).
type Entry struct {
	// Name is the object or sub-folder's name below the folder: "D.json"
	// or "D/".
	Name string
	// URL is where it is.
	URL URL
}

// List lists what lies directly under the folder u: its objects and its
// sub-folders (names ending in "/"), in name order. A bucket that does not
// exist matches model.ErrInvalid and fs.ErrNotExist.
func (s *Store) List(ctx context.Context, u URL) ([]Entry, error) {
	dir := u.Dir()
	var out []Entry
	err := s.list(ctx, dir, func(a *storage.ObjectAttrs) {
		name := a.Prefix
		if name == "" {
			name = a.Name
		}
		name = strings.TrimPrefix(name, dir.Name)
		if name != "" {
			out = append(out, Entry{Name: name, URL: dir.Join(name)})
		}
	})
	return out, err
}

// list lists the folder dir, one level, calling each for every object and
// sub-folder (a.Prefix set).
func (s *Store) list(ctx context.Context, dir URL, each func(*storage.ObjectAttrs)) error {
	wd := s.watch(ctx)
	defer wd.stop()
	q := &storage.Query{Prefix: dir.Name, Delimiter: "/"}
	if err := q.SetAttrSelection([]string{"Name", "Generation", "Size"}); err != nil {
		return err
	}
	it := s.client.Bucket(dir.Bucket).Objects(wd.ctx, q)
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return s.fail(wd, dir, "listing", err)
		}
		wd.alive()
		each(a)
	}
}

// Load reads the snapshot at u: a Snapshot JSON object, or a snapshot
// folder when u is a prefix or no object has its name but objects lie
// under it as a folder. The caller closes the snapshot. Errors name u:
//   - model.ErrInvalid for a malformed snapshot, a missing bucket, object
//     or folder (these also match fs.ErrNotExist), an object over the size
//     bound;
//   - model.ErrNotReady for a folder whose upload has not finished, or an
//     object replaced or deleted while it was read;
//   - a *storeerr.UnreachableError when Cloud Storage did not answer.
func (s *Store) Load(ctx context.Context, u URL) (*model.Snapshot, error) {
	if u.IsPrefix() {
		return s.loadFolder(ctx, u)
	}
	attrs, err := s.attrs(ctx, u)
	if errors.Is(err, storage.ErrObjectNotExist) {
		snap, err := s.loadFolder(ctx, u.Dir())
		if errors.Is(err, model.ErrMissing) {
			return nil, &model.MissingError{Msg: fmt.Sprintf("%v: input %s does not exist: no object of that name, and no folder %s", model.ErrInvalid, u, u.Dir()), Input: true}
		}
		return snap, err
	}
	if err != nil {
		return nil, err
	}
	return s.loadObject(ctx, u, attrs.Generation)
}

// attrs reads the attributes of the object u.
func (s *Store) attrs(ctx context.Context, u URL) (*storage.ObjectAttrs, error) {
	wd := s.watch(ctx)
	defer wd.stop()
	a, err := s.client.Bucket(u.Bucket).Object(u.Name).Attrs(wd.ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, s.fail(wd, u, "reading", err)
	}
	return a, nil
}

// loadObject reads the Snapshot JSON object u at generation gen, spooled
// to a temporary file as stdin is (model.Spool).
func (s *Store) loadObject(ctx context.Context, u URL, gen int64) (*model.Snapshot, error) {
	wd := s.watch(ctx)
	defer wd.stop()
	r, err := s.client.Bucket(u.Bucket).Object(u.Name).Generation(gen).NewReader(wd.ctx)
	if err != nil {
		return nil, s.readErr(wd, u, gen, err)
	}
	defer r.Close()
	body := &watchedReader{r: r, wd: wd, limit: maxSnapshotObject}
	snap, err := model.Spool(body)
	if err != nil {
		if body.err != nil {
			return nil, s.readErr(wd, u, gen, body.err)
		}
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	return snap, nil
}

// maxSnapshotObject bounds a Snapshot JSON object as input.MaxFetchBytes
// bounds an HTTP download.
const maxSnapshotObject = 1 << 30

// readErr says why reading the object u at generation gen failed: gone
// (replaced or deleted since it was listed) is not ready, no answer is
// unreachable.
func (s *Store) readErr(wd *watchdog, u URL, gen int64, err error) error {
	switch {
	case errors.Is(err, storage.ErrObjectNotExist):
		return fmt.Errorf("%w: %s was replaced or deleted while the snapshot was read (generation %d, listed at the start, is gone): the upload is still changing; nothing was written",
			model.ErrNotReady, u, gen)
	case errors.Is(err, storage.ErrBucketNotExist):
		return fmt.Errorf("%w: %s: bucket %s does not exist", model.ErrInvalid, u, u.Bucket)
	case errors.Is(err, errTooLarge):
		return fmt.Errorf("%w: %s: %w", model.ErrInvalid, u, err)
	}
	return s.fail(wd, u, "reading", err)
}

// fail words an error of a request about u: a missing bucket is invalid
// input, a request that got no answer names the endpoint and the bound.
func (s *Store) fail(wd *watchdog, u URL, doing string, err error) error {
	if errors.Is(err, storage.ErrBucketNotExist) {
		return &model.MissingError{Msg: fmt.Sprintf("%v: %s: bucket %s does not exist", model.ErrInvalid, u, u.Bucket)}
	}
	if wd.expired() {
		// The client retried until the bound; its last error (a reset,
		// a refused connection) says more than the bound does.
		last := ""
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			last = fmt.Sprintf(" (last error: %v)", err)
		}
		err = fmt.Errorf("%s %s: %w%s", doing, u, context.DeadlineExceeded, last)
		return &storeerr.UnreachableError{Endpoint: s.endpoint, Within: s.within, Err: err}
	}
	if ctxErr := wd.parent.Err(); ctxErr != nil {
		return fmt.Errorf("%s %s: %w", doing, u, context.Cause(wd.parent))
	}
	return fmt.Errorf("%s %s: %w", doing, u, err)
}

// errTooLarge: an object over its size bound.
var errTooLarge = errors.New("object too large")

// watchdog ends a request's context once it has gone timeout without
// progress (alive), so that a large transfer may take as long as it needs
// while one that stalls fails in bounded time.
type watchdog struct {
	parent  context.Context
	ctx     context.Context
	cancel  context.CancelCauseFunc
	timer   *time.Timer
	timeout time.Duration
	mu      sync.Mutex
	fired   bool
}

func (s *Store) watch(ctx context.Context) *watchdog {
	wd := &watchdog{parent: ctx, timeout: s.timeout}
	wd.ctx, wd.cancel = context.WithCancelCause(ctx)
	wd.timer = time.AfterFunc(s.timeout, func() {
		wd.mu.Lock()
		wd.fired = true
		wd.mu.Unlock()
		wd.cancel(context.DeadlineExceeded)
	})
	return wd
}

// alive notes progress: the bound starts again.
func (w *watchdog) alive() { w.timer.Reset(w.timeout) }

// expired reports whether the bound ran out.
func (w *watchdog) expired() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fired
}

func (w *watchdog) stop() {
	w.timer.Stop()
	w.cancel(context.Canceled)
}

// watchedReader reads r, noting progress to wd, at most limit bytes; err
// keeps the read's own error for the message.
type watchedReader struct {
	r     io.Reader
	wd    *watchdog
	limit int64
	n     int64
	err   error
}

func (w *watchedReader) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.wd.alive()
	}
	w.n += int64(n)
	if w.n > w.limit {
		w.err = fmt.Errorf("%w: more than %d bytes", errTooLarge, w.limit)
		return n, w.err
	}
	if err != nil && !errors.Is(err, io.EOF) {
		w.err = err
	}
	return n, err
}
