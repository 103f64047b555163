// Package reloadfile reads files that are replaced while a process runs — certificates, keys,
// CA bundles, passwords from mounted Secrets — again when they change, so that rotating them
// needs no restart. A File is checked each time it is used: one stat, and a read only when the
// file's size, modification time or inode differ from the last read. Kubernetes updates a
// mounted Secret by swapping a symlink; Stat follows it, so the next use sees the new content.
// When a file cannot be read or parsed (missing for a moment, a certificate renewed before its
// key), the last good content keeps being used and the error is reported by Err.
package reloadfile

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stamp identifies one version of a file on disk.
type stamp struct {
	size  int64
	mtime time.Time
	ino   uint64
}

func stampOf(fi os.FileInfo) stamp {
	s := stamp{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = st.Ino
	}
	return s
}

// File is a file whose content is re-read when it changes. It is safe for concurrent use.
type File struct {
	path    string
	mu      sync.Mutex
	stamp   stamp
	data    []byte
	version uint64
	err     error
}

// Open reads path; it fails when the file cannot be read now.
func Open(path string) (*File, error) {
	f := &File{path: path}
	if _, _, err := f.Read(); err != nil {
		return nil, err
	}
	return f, nil
}

// Path is the file's name.
func (f *File) Path() string { return f.path }

// Read returns the file's current content and its version, a number that grows each time the
// content is read anew. When the file cannot be read, the last content read is returned with
// the error (nil content before the first successful read).
func (f *File) Read() ([]byte, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err != nil {
		f.err = err
		return f.data, f.version, err
	}
	if s := stampOf(fi); f.version == 0 || s != f.stamp {
		data, err := os.ReadFile(f.path)
		if err != nil {
			f.err = err
			return f.data, f.version, err
		}
		f.stamp, f.data = s, data
		f.version++
	}
	f.err = nil
	return f.data, f.version, nil
}

// Parsed is what parse makes of the current content of some files, made again when any of them
// changes. A parse error keeps the previous value (a certificate replaced before its key is not
// a valid pair until both are); Get reports the error.
type Parsed[T any] struct {
	files []*File
	parse func(contents ...[]byte) (T, error)

	mu       sync.Mutex
	seen     []uint64
	value    T
	version  uint64
	have     bool
	parseErr error
}

// NewParsed opens paths and parses them once; it fails when they cannot be read or parsed now.
func NewParsed[T any](parse func(contents ...[]byte) (T, error), paths ...string) (*Parsed[T], error) {
	p := &Parsed[T]{parse: parse, seen: make([]uint64, len(paths))}
	for _, path := range paths {
		f, err := Open(path)
		if err != nil {
			return nil, err
		}
		p.files = append(p.files, f)
	}
	if _, _, err := p.Get(); err != nil {
		return nil, err
	}
	return p, nil
}

// Get returns the value for the files' current content and a version that changes whenever the
// value does. After a failed read or parse it returns the previous value and the error.
func (p *Parsed[T]) Get() (T, uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	contents := make([][]byte, len(p.files))
	versions := make([]uint64, len(p.files))
	changed := !p.have
	var readErr error
	for i, f := range p.files {
		data, v, err := f.Read()
		if err != nil {
			readErr = errors.Join(readErr, err)
		}
		contents[i], versions[i] = data, v
		if v != p.seen[i] {
			changed = true
		}
	}
	if readErr != nil && !p.have {
		return p.value, p.version, readErr
	}
	if changed && readErr == nil {
		copy(p.seen, versions)
		v, err := p.parse(contents...)
		if err != nil {
			p.parseErr = err
			if !p.have {
				return p.value, p.version, err
			}
		} else {
			p.value, p.have, p.parseErr = v, true, nil
			p.version++
		}
	}
	return p.value, p.version, errors.Join(readErr, p.parseErr)
}

// KeyPair is a certificate and its key (PEM files), reloaded when either changes.
func KeyPair(certFile, keyFile string) (*Parsed[*tls.Certificate], error) {
	p, err := NewParsed(func(c ...[]byte) (*tls.Certificate, error) {
		cert, err := tls.X509KeyPair(c[0], c[1])
		if err != nil {
			return nil, fmt.Errorf("certificate %s with key %s: %w", certFile, keyFile, err)
		}
		return &cert, nil
	}, certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load certificate %s: %w", certFile, err)
	}
	return p, nil
}

// CertPool is the union of CA bundles (PEM files), reloaded when any changes.
func CertPool(caFiles ...string) (*Parsed[*x509.CertPool], error) {
	if len(caFiles) == 0 {
		return nil, errors.New("no CA bundle")
	}
	p, err := NewParsed(func(c ...[]byte) (*x509.CertPool, error) {
		pool := x509.NewCertPool()
		for i, data := range c {
			if !pool.AppendCertsFromPEM(data) {
				return nil, fmt.Errorf("CA bundle %s: no PEM certificate found", caFiles[i])
			}
		}
		return pool, nil
	}, caFiles...)
	if err != nil {
		return nil, fmt.Errorf("load CA bundle %s: %w", strings.Join(caFiles, ","), err)
	}
	return p, nil
}
