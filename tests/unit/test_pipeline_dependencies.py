"""The pipeline's dependencies are versions its PySpark supports."""
import warnings

import pytest

pytest.importorskip("pyspark")


def test_the_installed_pandas_is_one_pyspark_supports():
    """PySpark 4.2 warns on every pandas UDF it defines (Spark uses them too) that pandas 3 may not work:
    the spark extra keeps pandas 2 (setup.cfg), and this fails if a pandas PySpark warns about is installed."""
    from pyspark.sql.functions import pandas_udf
    from pyspark.sql.types import LongType

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pandas_udf(lambda values: values, LongType())
