package harness

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/idemkeys/payments/internal/testkit"
)

// root is the repository, two folders up from this package.
const root = "../.."

// composeFile is the part of docker-compose.yml this test reads.
type composeFile struct {
	Services map[string]struct {
		Profiles    []string          `yaml:"profiles"`
		Image       string            `yaml:"image"`
		Build       string            `yaml:"build"`
		Entrypoint  []string          `yaml:"entrypoint"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   map[string]any    `yaml:"depends_on"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestComposeHAProfileIsTheTestedTopology holds docker-compose.yml's ha
// profile to what the tests run (no Docker engine runs here, so the file is
// read, not started): a standby made and run as StartStandby makes and
// runs it (StandbySettings, StandbyName), a PgBouncer in front of each
// server with testkit.PgBouncerSettings, Debian 12's PgBouncer as the tests
// use, and an API whose DATABASE_URL names both PgBouncers, primary first,
// with FailoverParams and the exec query mode (TestFailoverBehindPgBouncers),
// migrating over both servers directly (MIGRATE_DATABASE_URL). The default
// services do not depend on the profile's.
func TestComposeHAProfileIsTheTestedTopology(t *testing.T) {
	var compose composeFile
	if err := yaml.Unmarshal([]byte(readFile(t, "docker-compose.yml")), &compose); err != nil {
		t.Fatal(err)
	}
	ha := []string{"postgres-replica", "pgbouncer", "pgbouncer-replica", "api-ha"}
	for name, svc := range compose.Services {
		inProfile := slices.Contains(svc.Profiles, "ha")
		if slices.Contains(ha, name) != inProfile {
			t.Errorf("service %s: profiles %v; the ha profile is exactly %v", name, svc.Profiles, ha)
		}
		for dep := range svc.DependsOn {
			if !inProfile && slices.Contains(ha, dep) {
				t.Errorf("service %s, outside the ha profile, depends on %s", name, dep)
			}
		}
	}
	for _, name := range ha {
		if _, ok := compose.Services[name]; !ok {
			t.Fatalf("docker-compose.yml has no service %s", name)
		}
	}

	// The primary admits replication; the standby is a base backup of it,
	// run with the harness's settings under the harness's name.
	primary := compose.Services["postgres"]
	if !slices.Contains(primary.Volumes, "./deploy/postgres/replication.sh:/docker-entrypoint-initdb.d/replication.sh:ro") {
		t.Error("postgres does not mount deploy/postgres/replication.sh among its init scripts")
	}
	if !strings.Contains(readFile(t, "deploy/postgres/replication.sh"), "host replication all all scram-sha-256") {
		t.Error("deploy/postgres/replication.sh does not admit replication connections")
	}
	replica := compose.Services["postgres-replica"]
	if replica.Image != primary.Image {
		t.Errorf("the standby runs %s, the primary %s", replica.Image, primary.Image)
	}
	if !slices.Contains(replica.Volumes, "./deploy/postgres/replica.sh:/replica.sh:ro") || !slices.Equal(replica.Entrypoint, []string{"bash", "/replica.sh"}) {
		t.Error("postgres-replica does not run deploy/postgres/replica.sh")
	}
	script := readFile(t, "deploy/postgres/replica.sh")
	for _, want := range []string{"pg_basebackup -h postgres -p 5432", " -R ", "-X stream", "application_name=" + StandbyName} {
		if !strings.Contains(script, want) {
			t.Errorf("deploy/postgres/replica.sh lacks %q", want)
		}
	}
	for _, setting := range StandbySettings {
		if !strings.Contains(script, "-c "+setting+" ") {
			t.Errorf("deploy/postgres/replica.sh does not run the standby with %s (harness.StandbySettings)", setting)
		}
	}

	// A PgBouncer in front of each server, as the tests run it.
	for name, upstream := range map[string]string{"pgbouncer": "postgres", "pgbouncer-replica": "postgres-replica"} {
		svc := compose.Services[name]
		if svc.Build != "deploy/pgbouncer" || svc.Environment["PGBOUNCER_UPSTREAM"] != upstream {
			t.Errorf("%s: build %q, upstream %q; want deploy/pgbouncer in front of %s", name, svc.Build, svc.Environment["PGBOUNCER_UPSTREAM"], upstream)
		}
	}
	if !strings.Contains(readFile(t, "deploy/pgbouncer/Dockerfile"), "FROM debian:12-slim") {
		t.Error("deploy/pgbouncer/Dockerfile does not install Debian 12's PgBouncer, the one the tests run")
	}
	ini := map[string]string{}
	for line := range strings.Lines(readFile(t, "deploy/pgbouncer/pgbouncer.ini")) {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(strings.TrimSpace(line), ";") {
			ini[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	for k, v := range testkit.PgBouncerSettings {
		if ini[k] != v {
			t.Errorf("deploy/pgbouncer/pgbouncer.ini: %s = %q, the tests run with %q (testkit.PgBouncerSettings)", k, ini[k], v)
		}
	}

	// The API: through both PgBouncers, primary first, writable first,
	// in exec mode; migrations over both servers.
	api := compose.Services["api-ha"]
	wantPooled := map[string]string{"default_query_exec_mode": testkit.PgBouncerExecMode}
	wantDirect := map[string]string{}
	for _, p := range FailoverParams {
		wantPooled[p[0]], wantDirect[p[0]] = p[1], p[1]
	}
	checkURL(t, "api-ha DATABASE_URL", api.Environment["DATABASE_URL"], []string{"pgbouncer:6432", "pgbouncer-replica:6432"}, wantPooled)
	checkURL(t, "api-ha MIGRATE_DATABASE_URL", api.Environment["MIGRATE_DATABASE_URL"], []string{"postgres:5432", "postgres-replica:5432"}, wantDirect)
	if _, ok := compose.Volumes["pgreplica"]; !ok {
		t.Error("the standby's volume pgreplica is not declared")
	}
}

// checkURL checks a PostgreSQL URL's hosts, in order, and that its query
// holds every parameter of want.
func checkURL(t *testing.T, what, raw string, hosts []string, want map[string]string) {
	t.Helper()
	got, err := testkit.PostgresHosts(raw)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if !slices.Equal(got, hosts) {
		t.Errorf("%s names %v, want %v", what, got, hosts)
	}
	_, query, _ := strings.Cut(raw, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("%s: %s=%q, want %q", what, k, q.Get(k), v)
		}
	}
}
