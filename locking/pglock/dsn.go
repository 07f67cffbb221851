package pglock

import (
	"errors"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/snapwriter/snapwriter/locking"
)

// ParseDSN parses a PostgreSQL connection string, in URL or keyword/value
// form, as NewPool does, without connecting. Its error is InvalidArgument
// and never shows the DSN's password: pgx's parse error quotes the
// connection string, masking the password on a best-effort basis only,
// and net/url's errors quote fragments of it.
func ParseDSN(dsn string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		var pe *pgconn.ParseConfigError
		if errors.As(err, &pe) && pe.Unwrap() != nil {
			err = pe.Unwrap()
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &locking.Error{Code: locking.InvalidArgument, Op: "config", Err: Redact(dsn, err)}
	}
	return cfg, nil
}

// Endpoint names the server dsn points at, for messages: host:port (every
// fallback host too) and database, never its user or password. A DSN that
// does not parse is "the PostgreSQL lock database".
func Endpoint(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "the PostgreSQL lock database"
	}
	addr := func(host string, port uint16) string {
		if strings.HasPrefix(host, "/") {
			return "socket " + host + "/.s.PGSQL." + strconv.Itoa(int(port))
		}
		return net.JoinHostPort(host, strconv.Itoa(int(port)))
	}
	hosts := []string{addr(cfg.Host, cfg.Port)}
	for _, fb := range cfg.Fallbacks {
		if h := addr(fb.Host, fb.Port); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	s := "the PostgreSQL lock database at " + strings.Join(hosts, ", ")
	if cfg.Database != "" {
		s += " (database " + cfg.Database + ")"
	}
	// Belt and braces: nothing above comes from the password, but a
	// malformed DSN could put it where a host is expected.
	return redact(dsn, s)
}

// Redact returns err with dsn's password, wherever its message holds it,
// replaced by xxxxx; errors.Is and errors.As still reach err. Use it on
// any error that may quote the connection string (connecting, parsing)
// before showing it. It returns nil for a nil err.
func Redact(dsn string, err error) error {
	if err == nil {
		return nil
	}
	if msg := redact(dsn, err.Error()); msg != err.Error() {
		return redacted{err, msg}
	}
	return err
}

// redacted is an error whose text has a DSN's password masked.
type redacted struct {
	err error
	msg string
}

func (r redacted) Error() string { return r.msg }
func (r redacted) Unwrap() error { return r.err }

// redact replaces dsn's password, wherever msg holds it, by xxxxx.
func redact(dsn, msg string) string {
	for _, pw := range passwords(dsn) {
		if len(pw) > 0 {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}

// kvPassword finds password=… in a keyword/value connection string.
var kvPassword = regexp.MustCompile(`password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// passwords returns the password candidates in dsn, URL or keyword form,
// raw and unquoted.
func passwords(dsn string) []string {
	var pws []string
	if _, rest, ok := strings.Cut(dsn, "://"); ok {
		if i := strings.IndexAny(rest, "/?"); i >= 0 {
			rest = rest[:i]
		}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				pws = append(pws, pw)
				if u, err := url.PathUnescape(pw); err == nil {
					pws = append(pws, u)
				}
			}
		}
	}
	for _, m := range kvPassword.FindAllStringSubmatch(dsn, -1) {
		pws = append(pws, m[1], strings.Trim(m[1], "'"))
	}
	return pws
}
