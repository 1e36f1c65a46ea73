package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/internal/refservertest"
	"github.com/obol-gateway/obol/mcpgateway/admin/operator"
)

// runBin runs the built refserver with args and the environment env added.
func runBin(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(refservertest.Build(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// TestCLIHelp: -h and help list every subcommand with a line each, and each
// subcommand's -h names its positional arguments and environment.
func TestCLIHelp(t *testing.T) {
	subs := []string{"help", "version", "config check", "store init", "scope-status", "unknown list|settle", "approvals list|approve|deny",
		"scope-version", "store ..."}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, stdout, stderr := runBin(t, nil, args...)
		if code != 0 {
			t.Errorf("%v: exit %d\n%s", args, code, stderr)
		}
		for _, s := range append(subs, operator.EnvApproverKey, envRedisURL, envDeploymentID, "-config file") {
			if !strings.Contains(stdout, s) {
				t.Errorf("%v does not list %q:\n%s", args, s, stdout)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"unknown", "-h"}, []string{"settle KEY", operator.EnvApproverKey}},
		{[]string{"unknown", "settle", "-h"}, []string{"settle KEY", operator.EnvApproverKey, "-attempts"}},
		{[]string{"approvals", "-h"}, []string{"approve TICKET", "deny TICKET", operator.EnvApproverKey}},
		{[]string{"approvals", "approve", "-h"}, []string{"approve TICKET", operator.EnvApproverKey}},
		{[]string{"scope-version", "-h"}, []string{"advance", operator.EnvApproverKey}},
		{[]string{"store", "-h"}, []string{"acknowledge-data-loss", operator.EnvApproverKey}},
		{[]string{"scope-status", "-h"}, []string{"-redis", envRedisURL}},
		{[]string{"store", "init", "-h"}, []string{"-config FILE", envRedisURL, envDeploymentID}},
		{[]string{"config", "check", "-h"}, []string{"-config FILE", envRedisURL, envDeploymentID}},
	} {
		_, stdout, stderr := runBin(t, nil, tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(stdout+stderr, w) {
				t.Errorf("%v does not mention %q:\n%s%s", tc.args, w, stdout, stderr)
			}
		}
	}
}

// TestCLIVersion: the module path and the build's VCS revision.
func TestCLIVersion(t *testing.T) {
	code, stdout, stderr := runBin(t, nil, "version")
	if code != 0 || !strings.HasPrefix(stdout, "refserver github.com/obol-gateway/obol ") || !strings.Contains(stdout, " revision ") {
		t.Errorf("exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestCLIConfigCheck: the example as shipped is refused by field, nothing
// started; with its keys replaced it passes on a Redis, and production
// refuses the embedded store.
func TestCLIConfigCheck(t *testing.T) {
	data, fc := readExampleConfig(t)
	var env []string
	for _, c := range fc.Connections {
		env = append(env, c.SecretEnv+"="+e2eSecret)
	}
	code, stdout, stderr := runBin(t, env, "config", "check", "-config", exampleConfigPath, "-redis", "redis://127.0.0.1:1")
	if code != 1 || stdout != "" {
		t.Errorf("as shipped: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, field := range []string{"workspaces[0].api_keys[0]", "workspaces[1].api_keys[0]", "approver_keys[0].key"} {
		if !strings.Contains(stderr, field+": the template's REPLACE_ME placeholder") {
			t.Errorf("%s not named:\n%s", field, stderr)
		}
	}
	if strings.Contains(stderr, "listening") || strings.Contains(stderr, "EMBEDDED") {
		t.Errorf("something started:\n%s", stderr)
	}

	path := filepath.Join(t.TempDir(), "obol.json")
	if err := os.WriteFile(path, replacePlaceholders(data), 0o600); err != nil {
		t.Fatal(err)
	}
	env = append(env, envDeploymentID+"="+e2eDeployment, envRedisURL+"=")
	code, stdout, stderr = runBin(t, env, "config", "check", "-config", path, "-redis", "redis://127.0.0.1:1")
	if code != 0 || stdout != path+": OK (environment production, 4 tools)\n" {
		t.Errorf("keys replaced: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runBin(t, env, "config", "check", "-config", path)
	if code != 1 || !strings.Contains(stderr, "production refuses the embedded store") {
		t.Errorf("production on the embedded store: exit %d\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = runBin(t, env, "-config", path)
	if code != 1 || !strings.Contains(stderr, "production refuses the embedded store") {
		t.Errorf("serving production on the embedded store: exit %d\n%s", code, stderr)
	}
}
