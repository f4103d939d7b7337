"""Publishing to the Hugging Face Hub: datasets (gated where UMLS or MIMIC data require it), rewired models
and metric Spaces, each with a dry run that writes what would be uploaded."""
