// Package gcsserver runs a Cloud Storage API server on loopback for tests
// and the demo: github.com/fsouza/fake-gcs-server, in process, over plain
// HTTP. The storage client reaches it as it reaches Cloud Storage, by
// STORAGE_EMULATOR_HOST (HostEnv) or Client (gcs.NewClient, as the CLI
// opens one); nothing about the client is mocked. Only tests and gcsserver/withgcs import it.
package gcsserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/snapwriter/snapwriter/input/gcs"
)

// HostEnv is the variable the storage client reads the server from.
const HostEnv = "STORAGE_EMULATOR_HOST"

// Server is a running Cloud Storage API server.
type Server struct {
	srv *fakestorage.Server
	// Host is what HostEnv takes: http://127.0.0.1:PORT.
	Host string
}

// Start starts a server on a free loopback port (port 0), or on port.
func Start(port int) (*Server, error) {
	if port == 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http", Host: "127.0.0.1", Port: uint16(port), NoListener: false,
		// Quiet: its request log would drown the tests' own.
		Writer: discard{},
	})
	if err != nil {
		return nil, fmt.Errorf("starting the Cloud Storage server: %w", err)
	}
	return &Server{srv: srv, Host: "http://127.0.0.1:" + strconv.Itoa(port)}, nil
}

// Stop stops the server; its connections are closed.
func (s *Server) Stop() { s.srv.Stop() }

// Client is a storage client of the server, as the CLI opens one for
// STORAGE_EMULATOR_HOST (gcs.NewClient).
func (s *Server) Client(ctx context.Context) (*storage.Client, error) {
	return gcs.NewClient(ctx, s.Host)
}

// CreateBucket creates bucket name.
func (s *Server) CreateBucket(name string) {
	s.srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: name})
}

// Put stores content as the object name of bucket (the bucket is created
// if need be) and returns its generation.
func (s *Server) Put(bucket, name string, content []byte) int64 {
	s.srv.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: bucket, Name: name, ContentType: "application/json"}, Content: content})
	o, err := s.srv.GetObject(bucket, name)
	if err != nil {
		return 0
	}
	return o.Generation
}

// Delete removes the object name of bucket.
func (s *Server) Delete(bucket, name string) error {
	return s.srv.Backend().DeleteObject(bucket, name)
}

// PutDir stores every regular file of dir as bucket's object prefix+name,
// the one named last (if any) after all the others, as the application's
// uploader writes manifest.json last.
func (s *Server) PutDir(bucket, prefix, dir, last string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var lastContent []byte
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if e.Name() == last {
			lastContent = b
			continue
		}
		s.Put(bucket, prefix+e.Name(), b)
	}
	if lastContent != nil {
		s.Put(bucket, prefix+last, lastContent)
	}
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
