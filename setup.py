from setuptools import setup, find_packages

setup(
    name="gluon_dyn",
    version="0.1.0",
    description="Imperative Python control flow for MXNet Gluon, run as symbolic graphs",
    packages=find_packages(include=["gluon_dyn", "gluon_dyn.*", "tvm_bridge", "tvm_bridge.*"]),
    package_data={"gluon_dyn": ["_lib/*.so"]},
    python_requires=">=3.8",
    install_requires=["mxnet==1.9.1", "numpy==1.23.5", "diastatic-malt==2.15.3"],
)
