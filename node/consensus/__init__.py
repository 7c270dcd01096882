"""node/consensus"""
