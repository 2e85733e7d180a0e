"""nsysdoc: why is my GPU training slow? Diagnoses from Nsight Systems captures."""
__version__ = "0.1.0"
