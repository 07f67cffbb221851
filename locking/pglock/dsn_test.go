package pglock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/pglock"
)

func TestParseDSNNeverShowsThePassword(t *testing.T) {
	for _, dsn := range []string{
		"postgres://u:s3cr%2Ft@db.example:5432/x?sslmode=bogus",
		"postgres://u:s3cr/t@db.example:notaport/x",
		"host=db.example password='s3cr/t' port=notaport",
		"host=db.example password=s3cr/t sslmode=bogus",
	} {
		_, err := pglock.ParseDSN(dsn)
		if err == nil {
			t.Fatalf("ParseDSN(%q) = nil error, want one", dsn)
		}
		if !errors.Is(err, locking.ErrInvalidArgument) {
			t.Errorf("ParseDSN(%q): %v, want InvalidArgument", dsn, err)
		}
		if strings.Contains(err.Error(), "s3cr") {
			t.Errorf("ParseDSN(%q) error shows the password: %v", dsn, err)
		}
	}
	if _, err := pglock.ParseDSN("postgres://u:pw@db.example:5432/x"); err != nil {
		t.Errorf("a good DSN: %v", err)
	}
}

func TestRedact(t *testing.T) {
	cause := errors.New("cause")
	for _, c := range []struct{ dsn, msg, want string }{
		{"postgres://u:p%40ss@h/db", "dial postgres://u:p%40ss@h/db as p@ss", "dial postgres://u:xxxxx@h/db as xxxxx"},
		{"host=h password='a b' user=u", "password='a b' and a b", "password=xxxxx and xxxxx"},
		{"host=h password=hunter2", "hunter2 failed", "xxxxx failed"},
		{"host=h user=u", "nothing to mask", "nothing to mask"},
	} {
		err := pglock.Redact(c.dsn, errors.Join(errors.New(c.msg), cause))
		if got := strings.Split(err.Error(), "\n")[0]; got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.dsn, got, c.want)
		}
		if !errors.Is(err, cause) {
			t.Errorf("Redact(%q) lost the cause", c.dsn)
		}
	}
	if pglock.Redact("host=h", nil) != nil {
		t.Error("Redact of nil is not nil")
	}
}

func TestEndpoint(t *testing.T) {
	for _, c := range []struct{ dsn, want string }{
		{"postgres://u:pw@db.example:6543/locks", "the PostgreSQL lock database at db.example:6543 (database locks)"},
		{"host=a,b port=5432,5433 dbname=d password=pw", "the PostgreSQL lock database at a:5432, b:5433 (database d)"},
		{"host=/run/pg port=5432", "the PostgreSQL lock database at socket /run/pg/.s.PGSQL.5432"},
		{"postgres://u:pw@h:notaport/d", "the PostgreSQL lock database"},
	} {
		if got := pglock.Endpoint(c.dsn); got != c.want {
			t.Errorf("Endpoint(%q) = %q, want %q", c.dsn, got, c.want)
		}
	}
}
