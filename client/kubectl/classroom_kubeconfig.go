package kubectl

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"skiff.dev/skiff/client"
	"skiff.dev/skiff/internal/atomicfile"
	"skiff.dev/skiff/pki"
)

// StudentKubeconfig is where CreateClassroom writes a student's kubeconfig in dir.
func StudentKubeconfig(dir, student string) string {
	return filepath.Join(dir, student+".kubeconfig")
}

// ensureKubeconfig keeps the student's kubeconfig when it still serves
// (kubeconfigFits), else issues a certificate and writes a new one.
func ensureKubeconfig(ctx context.Context, t Teacher, r Classroom, student string) error {
	file := StudentKubeconfig(r.Dir, student)
	why := kubeconfigFits(file, t, r, student)
	if why == "" {
		t.say("%s: kubeconfig %s unchanged", student, file)
		return nil
	}
	cert, key, err := t.Issue(ctx, student, []string{r.Name}, r.Expiration)
	if err != nil {
		return fmt.Errorf("certificate: %w", err)
	}
	cfg := client.Config{Server: t.Cluster.Server, Servers: t.Cluster.Servers, CAData: t.Cluster.CAData,
		CertData: cert, KeyData: key, Namespace: student}
	b, err := client.UserKubeconfig(cfg, student)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(file, b, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	if why == errMissing {
		t.say("%s: kubeconfig %s written", student, file)
	} else {
		t.say("%s: kubeconfig %s written (%s)", student, file, why)
	}
	return nil
}

const errMissing = "missing"

// kubeconfigFits says why the kubeconfig in file does not serve the
// student any more, or "" when it does: it names the teacher's cluster
// (servers and CA) and the student's namespace, and holds a key and a
// certificate for the student in the room from that CA, valid now and not
// near its end.
func kubeconfigFits(file string, t Teacher, r Classroom, student string) string {
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		return errMissing
	}
	cfg, err := client.LoadKubeconfig(file)
	if err != nil {
		return fmt.Sprintf("the old one is unreadable: %v", err)
	}
	switch {
	case cfg.Server != t.Cluster.Server || !slices.Equal(cfg.Servers, t.Cluster.Servers):
		return "the old one names other servers"
	case !bytes.Equal(cfg.CAData, t.Cluster.CAData):
		return "the old one names another CA"
	case cfg.Namespace != student:
		return "the old one names another namespace"
	}
	pair, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	if err != nil {
		return fmt.Sprintf("the old one's certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Sprintf("the old one's certificate: %v", err)
	}
	ca, err := pki.FromPEM(t.Cluster.CAData)
	if err != nil {
		return fmt.Sprintf("the cluster's CA: %v", err)
	}
	now := t.now()
	user, groups := pki.Identity(cert)
	switch {
	case user != student || !slices.Contains(groups, r.Name):
		return fmt.Sprintf("the old certificate is %s in %v", user, groups)
	case ca.Verify(cert, now) != nil:
		return "the old certificate is not valid from this CA now"
	case pki.NeedsRenewal(cert, now):
		return "the old certificate expires " + cert.NotAfter.UTC().Format("2006-01-02 15:04 UTC")
	}
	return ""
}
