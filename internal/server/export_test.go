package server

// The decoders, for the fuzz targets of package server_test.
var (
	DecodeAdmissionReview  = decodeAdmissionReview
	DecodeConversionReview = decodeConversionReview
)
