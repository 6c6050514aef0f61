package table

import (
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"skiff.dev/skiff/api"
)

// The certificates.k8s.io group's kind, as Kubernetes' printCertificateSigningRequest.

func csrPrinter() Printer {
	doc := certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()
	return Printer{
		Columns: []metav1.TableColumnDefinition{nameColumn(), ageColumn(),
			col("SignerName", doc["signerName"]), col("Requestor", "Name of the user who created the request"),
			col("RequestedDuration", doc["expirationSeconds"]), col("Condition", "The condition of the request")},
		Cells: func(o api.Object, now time.Time) []any {
			c := o.(*api.CertificateSigningRequest)
			requested := "<none>"
			if e := c.Spec.ExpirationSeconds; e != nil {
				requested = duration.HumanDuration(time.Duration(*e) * time.Second)
			}
			return []any{c.Name, Age(now, c.CreationTimestamp.Time), c.Spec.SignerName, c.Spec.Username, requested, CSRCondition(c)}
		},
	}
}

// CSRCondition is the CONDITION column: Denied, Approved or Pending, then
// ",Failed" and ",Issued" when so.
func CSRCondition(c *api.CertificateSigningRequest) string {
	var approved, denied, failed bool
	for _, cond := range c.Status.Conditions {
		switch cond.Type {
		case api.CertificateApproved:
			approved = true
		case api.CertificateDenied:
			denied = true
		case api.CertificateFailed:
			failed = true
		}
	}
	status := "Pending"
	switch {
	case denied:
		status = "Denied"
	case approved:
		status = "Approved"
	}
	if failed {
		status += ",Failed"
	}
	if len(c.Status.Certificate) > 0 {
		status += ",Issued"
	}
	return status
}
